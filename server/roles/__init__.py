"""Each server role's chain of front end, write path and commit sink, declared in one place
(ZooKeeper's ``*ZooKeeperServer.setupRequestProcessors``): :mod:`.standalone`, :mod:`.leading`,
:mod:`.learning` (follower and observer), :mod:`.notserving` (an ensemble member between roles),
:mod:`.readonly` (a member cut off from its quorum, ``readonlymode.enabled``), all built by
:class:`.factory.RoleFactory`. Pure: no sockets, files or clocks (times are passed in); the
request path's modules are compiled with mypyc."""
