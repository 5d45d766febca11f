"""DevMachinePool controller (upstream v1.14's DevMachinePoolReconciler): the docker backend only (upstream's
DevMachinePoolBackendSpec has no other), run by the DockerMachinePool controller's functions
(capd_py/controllers/dockermachinepool.py) with DevMachines (docker backend) as the pool's instances. Same
finalizer as upstream's (`dockermachinepool.infrastructure.cluster.x-k8s.io`)."""

from __future__ import annotations

from capd_py.api import infrakinds
from capd_py.api.gvk import DEV_MACHINE_POOL
from capd_py.api.labels import FINALIZER_DOCKER_MACHINE_POOL
from capd_py.controllers import dockermachinepool as dmp
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, cluster_name_of, reconciler

KIND = Kind(gvk=DEV_MACHINE_POOL, reconcile=dmp.reconcile_docker, delete=dmp.delete_docker,
            finalizer=FINALIZER_DOCKER_MACHINE_POOL, cluster_name=cluster_name_of)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=DEV_MACHINE_POOL, reconcile=reconcile, watches=dmp.watches(infrakinds.DEV))
