"""What operators and tests see: four-letter words, the AdminServer, Prometheus metrics and the
test controls. Not compiled."""
