"""Process control: the servers, ensembles and link proxies the suite and the benchmarks run."""
