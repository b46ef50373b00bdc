"""The Trio shells: sockets, files and clocks around the pure cores. Not compiled.

* :mod:`.app` -- a server process: listeners, roles, start and stop;
* :mod:`.poller` -- plain-TCP client connections over one selector;
* :mod:`.persistence` -- recovery, the group-committing log writer, snapshots;
* :mod:`.cnxmanager` -- the election port (``QuorumCnxManager``);
* :mod:`.ensemble` -- an ensemble member (``QuorumPeer``): election, then a Zab role (a
  package split by job: spec, links, hosts, leading, learning, peer);
* :mod:`.tls` -- the secure client port's ``ssl.SSLContext``.
"""
