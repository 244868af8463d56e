"""Writing a feed's records and recording its progress (below the scans and the streaming query)."""
