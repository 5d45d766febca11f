"""kopf wiring: watches feed a deduplicating work queue; each kind has a thin reconcile function."""
