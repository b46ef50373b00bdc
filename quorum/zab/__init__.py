"""Zab (ZooKeeper Atomic Broadcast). Pure.

* :mod:`.zabwire` -- quorum-port packet types, zxid helpers, the unframed packet stream codec
  (with the raw SNAP payload);
* :mod:`.zab` -- the shared vocabulary of the Zab machines: states, :class:`~.zab.Ready` and its
  persist -> send -> apply -> advance contract, :class:`~.zab.Quorum`, :class:`~.zab.Timing`;
* :mod:`.leader` -- the leader and its learner handlers (discovery, sync choice, broadcast);
* :mod:`.learner` -- a follower or observer;
* :mod:`.applier` -- the one applier of Readies every host uses (the ensemble shell, the
  simulation, the tests): plans of persistence steps, pipelined appends, ``advance``.
"""
