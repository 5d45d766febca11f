"""Kubernetes API access (management and workload clusters): thin I/O adapters."""
