"""Command-line programs of the Python package (`mneme-tune`)."""
