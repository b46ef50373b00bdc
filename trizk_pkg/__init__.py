"""trizk: an Apache ZooKeeper 3.9 (and 3.8) compatible server in Python.

The repository's top-level directories (``jute/``, ``server/``, ``quorum/``, ``storage/``,
``compat/``) are installed as subpackages of this namespace through
``[tool.setuptools.package-dir]``; nothing is installed as a generic top-level module.
"""

__version__ = "0.1.0"

#: The Apache ZooKeeper release whose behaviour trizk reproduces by default (reported by
#: ``envi``/``srvr``): the current release line; ``trizk.zookeeperVersion=3.8.0`` picks 3.8.0's
#: answers instead (:mod:`trizk.server.common.release`).
ZOOKEEPER_VERSION = "3.9.3"
