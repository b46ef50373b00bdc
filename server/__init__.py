"""trizk.server: a ZooKeeper server's roles, wired together.

Pure cores (compiled with mypyc when a wheel is built):

* :mod:`.auth` -- ACL checks, authentication providers, SASL;
* :mod:`.common` -- what every role of one server shares: settings, ``ServerMetrics``;
* :mod:`.frontend` -- client connections, handshake, reads, watches, per-session FIFO;
* :mod:`.writes` -- the write path: sequencer, request -> txn, sessions, containers, forwarder;
* :mod:`.roles` -- each role's chain declared in one place.

Shells (interpreted; the only code that touches sockets, files and clocks):

* :mod:`.shell` -- the Trio shells: the listener and poller, persistence, the peer loops, TLS;
* :mod:`.ops` -- what operators see: four-letter words, the AdminServer, metrics, test controls;
* :mod:`.config` -- zoo.cfg, the command line, the docker entry point.
"""
