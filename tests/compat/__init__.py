"""Side by side with real Apache ZooKeeper (needs the oracle installed)."""
