"""On-disk grammars of Apache ZooKeeper 3.8 (txn log, snapshot) as pure functions of bytes.

Pure (compiled with mypyc): bytes in, records out and back; the files themselves are opened
only by :mod:`trizk.storage.disk`.
"""
