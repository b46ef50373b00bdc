"""Tools that record golden data from real Apache ZooKeeper for the tests."""
