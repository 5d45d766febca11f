"""DevMachine controller (upstream v1.14's DevMachineReconciler): one kind, two backends, chosen by the object's
`spec.backend`.

- docker: the DockerMachine controller's functions (capd_py/controllers/dockermachine.py), unchanged: a node
  container, bootstrap, providerID `docker:////<container>`;
- inMemory: capd_py/controllers/inmemory_backend_machine.py (no container: a fake VM, Node, etcd member and
  control-plane Pods in the cluster's in-memory workload API, providerID `in-memory://<name>`).
Same finalizer as upstream's (`dockermachine.infrastructure.cluster.x-k8s.io` for both kinds)."""

from __future__ import annotations

from capd_py.api import infrakinds
from capd_py.api.gvk import DEV_MACHINE
from capd_py.api.labels import FINALIZER_DOCKER_MACHINE
from capd_py.controllers import dockermachine, inmemory_backend_machine
from capd_py.controllers import dockermachine_watches as w
from capd_py.controllers.devbackend import by_backend
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, reconciler

_reconcile = by_backend(docker=dockermachine.reconcile_docker, in_memory=inmemory_backend_machine.reconcile)
_delete = by_backend(docker=dockermachine.delete_docker, in_memory=inmemory_backend_machine.delete)


KIND = Kind(gvk=DEV_MACHINE, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_DOCKER_MACHINE,
            ready=dockermachine.has_owner_machine)
reconcile = reconciler(KIND)


def controller() -> Controller:
    k = infrakinds.DEV
    return Controller(gvk=DEV_MACHINE, reconcile=reconcile, watches=w.watches(k), node_watches=[w.node_mapper(k)])
