"""The oracle runner: scenarios and their executor, normalising, random mode, the wire fuzzer,
stock command-line clients and the cross-check proxy."""
