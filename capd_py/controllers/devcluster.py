"""DevCluster controller (upstream v1.14's DevClusterReconciler): one kind, two backends, chosen by the object's
`spec.backend` as upstream's backendReconcilerFactory does.

- docker: the DockerCluster controller's functions (capd_py/controllers/dockercluster.py), unchanged: network,
  haproxy load balancer, endpoint, status;
- inMemory: capd_py/controllers/inmemory_backend_cluster.py (no containers: an in-memory workload cluster).
Same finalizer as upstream's (`dockercluster.infrastructure.cluster.x-k8s.io` for both kinds)."""

from __future__ import annotations

from capd_py.api import infrakinds
from capd_py.api.gvk import DEV_CLUSTER
from capd_py.api.labels import FINALIZER_DOCKER_CLUSTER
from capd_py.controllers import dockercluster, inmemory_backend_cluster
from capd_py.controllers.devbackend import by_backend
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, reconciler

_reconcile = by_backend(docker=dockercluster.reconcile_docker, in_memory=inmemory_backend_cluster.reconcile)
_delete = by_backend(docker=dockercluster.delete_docker, in_memory=inmemory_backend_cluster.delete)


KIND = Kind(gvk=DEV_CLUSTER, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_DOCKER_CLUSTER,
            cluster_name=lambda dc: dockercluster.cluster_name_of(dc) or "", ready=dockercluster.has_owner_cluster,
            gone=inmemory_backend_cluster.gone)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=DEV_CLUSTER, reconcile=reconcile, watches=dockercluster.watches(infrakinds.DEV))
