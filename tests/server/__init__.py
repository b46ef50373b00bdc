"""The pure server core: roles, request -> txn, sessions, metrics (no sockets)."""
