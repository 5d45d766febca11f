"""Managed topology (ClusterClass + Cluster.spec.topology): pure decisions.

- `gotemplate`: Go text/template + the sprig functions ClusterClass patches use (`valueFrom.template`, `enabledIf`).
- `variables`: ClusterClass variable schemas (openAPIV3Schema): validation and defaulting.
- `patches`: inline ClusterClass patches applied to the desired templates.
- `desired`: the objects a topology Cluster should have, and the upgrade order.
"""
