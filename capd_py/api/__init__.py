"""API layer: resource kinds, labels, conditions and contract accessors. Imports nothing above it."""
