"""trizk.quorum: ensembles in Apache ZooKeeper's own quorum protocol, as pure state machines.

Nothing here touches a socket, a file or a clock: messages and ticks go in, ``Ready`` bundles
and messages to send come out. The Trio shells that drive them are in
:mod:`trizk.server.shell` (:mod:`~trizk.server.shell.cnxmanager` for the election port,
:mod:`~trizk.server.shell.ensemble` for the quorum port).

* :mod:`.election` -- FastLeaderElection and the election port's wire codecs;
* :mod:`.zab` -- Zab: the packet codec, the shared vocabulary (``Ready``), leader and learner;
* :mod:`.verifier` -- membership (``QuorumMaj``), shared by both.
"""
