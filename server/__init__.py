"""trizk.server."""
