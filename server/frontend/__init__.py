"""The client front end: connections (sans-IO), handshake, auth, reads, watches, replies in
per-session order. Pure (compiled with mypyc)."""
