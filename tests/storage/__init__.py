"""The data tree, the txn log and snapshot formats, recovery."""
