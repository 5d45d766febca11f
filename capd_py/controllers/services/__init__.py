"""Services the controllers apply their decisions through (hold process-local state, do the I/O)."""
