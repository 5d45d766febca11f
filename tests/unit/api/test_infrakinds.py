"""Where each infrastructure kind keeps its docker fields, and which kinds go together: the one docker
implementation reads a DockerMachine's spec and a DevMachine's spec.backend.docker through these."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import infrakinds as ik
from capd_py.api.gvk import DEV_CLUSTER, DEV_MACHINE, DOCKER_CLUSTER, DOCKER_MACHINE_POOL

pytestmark = pytest.mark.unit


def obj(kind: str, spec: Any) -> dict[str, Any]:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": "x"},
            "spec": spec}


def test_docker_fields_of_each_kind() -> None:
    fields = {"customImage": "i:1", "preLoadImages": ["p"]}
    assert ik.docker_spec(obj("DockerMachine", {**fields, "providerID": "docker:////x"})) == {
        **fields, "providerID": "docker:////x"}
    assert ik.docker_spec(obj("DevMachine", {"providerID": "p", "backend": {"docker": fields}})) == fields
    assert ik.docker_spec(obj("DevMachine", {"backend": {"inMemory": {}}})) == {}
    assert ik.docker_spec(obj("DevCluster", {"backend": {"docker": {"failureDomains": [{"name": "a"}]}}})) == {
        "failureDomains": [{"name": "a"}]}
    assert ik.docker_spec(None) == {} and ik.docker_spec({"kind": "DevCluster"}) == {}


def test_pool_templates_and_instances() -> None:
    docker_pool = obj("DockerMachinePool", {"template": {"customImage": "i"}})
    dev_pool = obj("DevMachinePool", {"backend": {"docker": {"customImage": "i"}}})
    assert ik.pool_template(docker_pool) == ik.pool_template(dev_pool) == {"customImage": "i"}
    assert ik.instance_spec(docker_pool, {"customImage": "i"}) == {"customImage": "i"}
    assert ik.instance_spec(dev_pool, {"customImage": "i"}) == {"backend": {"docker": {"customImage": "i"}}}


def test_backend_is_docker_unless_a_dev_object_says_in_memory() -> None:
    assert ik.backend(obj("DevMachine", {"backend": {"inMemory": {}}})) == ik.BACKEND_IN_MEMORY
    assert ik.backend(obj("DevCluster", {"backend": {"docker": {}}})) == ik.BACKEND_DOCKER
    assert ik.backend(obj("DevCluster", {})) == ik.BACKEND_DOCKER  # upstream's default
    assert ik.backend(obj("DockerMachine", {"backend": {"inMemory": {}}})) == ik.BACKEND_DOCKER


def test_kinds_go_together() -> None:
    assert ik.kinds_of(obj("DevMachine", {})) == ik.kinds_of("DevMachinePool") == ik.DEV
    assert ik.kinds_of("DockerCluster") == ik.kinds_of(None) == ik.DOCKER
    assert (ik.DEV.cluster, ik.DEV.machine) == (DEV_CLUSTER, DEV_MACHINE) and ik.DEV.dev
    assert (ik.DOCKER.cluster, ik.DOCKER.pool) == (DOCKER_CLUSTER, DOCKER_MACHINE_POOL) and not ik.DOCKER.dev
