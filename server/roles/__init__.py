"""Each server role's chain of front end, write path and commit sink, declared in one place
(ZooKeeper's ``*ZooKeeperServer.setupRequestProcessors``). Pure (compiled with mypyc)."""
