"""changefeed.engine"""
