"""Apache ZooKeeper's own C client test suite (``zktest-mt``) run against ZooKeeper and trizk.

The suite is built from Debian's source package of the ZooKeeper release installed as the
oracle (:mod:`.build`), never copied into this repository. The same binary then runs twice:
against ZooKeeper, through the suite's own ``tests/zkServer.sh`` and Debian's ``zkServer.sh``
for the ensembles of its reconfig tests, and against trizk, through replacements of both
scripts (:mod:`.shims`) that start trizk with the same zoo.cfg and properties. Each test's
outcome is read from the binary's progress lines (:mod:`.results`, pure) and the two result
sets are put side by side (:mod:`.run`, the command).
"""
