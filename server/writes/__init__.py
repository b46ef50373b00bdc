"""The write path: sequencer (zxids), request -> txn preparation, sessions, containers, the
commit seam and a learner's forwarder. Pure (compiled with mypyc)."""
