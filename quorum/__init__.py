"""trizk.quorum."""
