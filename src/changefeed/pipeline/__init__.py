"""changefeed.pipeline"""
