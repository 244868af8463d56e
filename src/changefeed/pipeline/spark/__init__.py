"""The Spark session: made in one place, with our data sources registered."""
