"""purgatory"""
