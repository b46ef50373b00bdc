"""Four-letter words, the AdminServer, metrics."""
