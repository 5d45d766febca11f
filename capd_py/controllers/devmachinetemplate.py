"""DevMachineTemplate controller (upstream v1.14's DevMachineTemplateReconciler): `status.capacity`, the docker
host's CPUs and memory, whatever the backend, exactly as the DockerMachineTemplate controller writes it (the same
functions: capd_py/controllers/dockermachinetemplate.py)."""

from __future__ import annotations

from capd_py.api.gvk import DEV_MACHINE_TEMPLATE
from capd_py.controllers import dockermachinetemplate as dmt
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, reconciler

KIND = Kind(gvk=DEV_MACHINE_TEMPLATE, reconcile=dmt.reconcile_capacity, delete=dmt.delete_nothing, cluster_name=None,
            pausable=False)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=DEV_MACHINE_TEMPLATE, reconcile=reconcile)
