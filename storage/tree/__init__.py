"""The data tree and the replica: deterministic state, no I/O. Pure (compiled with mypyc)."""
