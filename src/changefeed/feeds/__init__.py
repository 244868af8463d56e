"""changefeed.feeds"""
