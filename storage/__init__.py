"""trizk.storage: the data tree, the txn log and the snapshots.

* :mod:`.tree` (pure, compiled) -- the in-memory data tree and the replica every role holds;
* :mod:`.formats` (pure, compiled) -- Apache ZooKeeper's on-disk grammars: txn log, snapshot,
  and the tree <-> snapshot / log replay glue;
* :mod:`.disk` (shell) -- the only modules that open files: the log writer, the fsync helper,
  recovery, the epoch files;
* :mod:`.dump` -- ``trizk-dump``, a command-line reader of both formats.
"""
