"""The `capd-py` command line: kind-style progress on stderr, data on stdout."""
