"""changefeed.topics"""
