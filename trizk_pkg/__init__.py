"""trizk: an Apache ZooKeeper 3.8 compatible server in Python.

The repository's top-level directories (``jute/``, ``server/``, ``quorum/``, ``storage/``,
``compat/``) are installed as subpackages of this namespace through
``[tool.setuptools.package-dir]``; nothing is installed as a generic top-level module.
"""

__version__ = "0.1.0"

#: The Apache ZooKeeper release whose behaviour trizk reproduces (reported by ``envi``/``srvr``).
ZOOKEEPER_VERSION = "3.8.0"
