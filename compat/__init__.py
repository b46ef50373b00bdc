"""trizk.compat: everything run side by side with real Apache ZooKeeper.

* :mod:`.run` -- ``python -m trizk.compat.run``, the compatibility suite from one command;
* :mod:`.oracle` -- scenarios, the executor, normalising, random mode, wire fuzzer, stock CLIs,
  the cross-check proxy and the raw client they share;
* :mod:`.procs` -- processes: servers, ensembles, Java quorum members, link proxies, network
  namespaces, the crash loop;
* :mod:`.bench` -- benchmarks (``python -m trizk.compat.bench``) and their load generator;
* :mod:`.capture` -- tools that record golden data from real ZooKeeper.
"""
