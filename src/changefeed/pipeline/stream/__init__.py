"""The per-feed streaming query (journal -> encoder -> topic) and job-wide resolved timestamps."""
