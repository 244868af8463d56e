"""changefeed.sql"""
