"""changefeed.cli"""
