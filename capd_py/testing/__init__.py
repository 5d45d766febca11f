"""Test support: a local management plane (envtest) and helpers."""
