"""trizk.compat."""
