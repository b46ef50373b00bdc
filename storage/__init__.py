"""trizk.storage."""
