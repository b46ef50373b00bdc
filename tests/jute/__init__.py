"""The Jute codec."""
