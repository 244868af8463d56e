"""changefeed.formats"""
