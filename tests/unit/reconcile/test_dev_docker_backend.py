"""The Docker provider's decisions read a Dev* object's docker backend exactly as they read a Docker* object: the
same node image, mounts, bootstrap timeout, pre-loaded images, load balancer image, failure domains and pool
instances come out of `spec.backend.docker` as out of the Docker* spec (one implementation for both)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile import dockermachinepool as rdmp
from capd_py.reconcile import imageload

pytestmark = pytest.mark.unit

MACHINE_FIELDS = {"customImage": "my/node:1", "preLoadImages": ["a:1"], "bootstrapTimeout": "90s",
                  "extraMounts": [{"containerPath": "/data", "hostPath": "/tmp/d", "readOnly": True}]}
CLUSTER_FIELDS = {"loadBalancer": {"imageRepository": "reg.example", "imageTag": "t1"},
                  "failureDomains": [{"name": "fd1", "controlPlane": True}]}


def docker(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": kind,
            "metadata": {"name": "x", "namespace": "ns", "uid": "u", "generation": 1}, "spec": spec}


def dev(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    return docker(kind, {"backend": {"docker": fields}})


@pytest.mark.parametrize("dm", [docker("DockerMachine", MACHINE_FIELDS), dev("DevMachine", MACHINE_FIELDS)])
def test_machine_decisions_read_the_backend(dm: dict[str, Any]) -> None:
    m = {"spec": {"version": "v1.34.4"}}
    assert dmr.node_image(dm, m, "capd-py/node") == "my/node:1"
    assert "(spec.customImage)" in dmr.image_decision(dm, m, "my/node:1", False).message
    assert [(x.source, x.target, x.read_only) for x in dmr.extra_mounts(dm)] == [("/tmp/d", "/data", True)]
    assert dmr.bootstrap_timeout(dm) == 90
    assert imageload.boot_images(dm, None) == {"a:1": imageload.SOURCE_SPEC}


def test_a_dev_machine_without_docker_fields_gets_the_defaults() -> None:
    dm = dev("DevMachine", {})
    assert dmr.node_image(dm, {"spec": {"version": "v1.34.4"}}, "capd-py/node") == "capd-py/node:v1.34.4"
    assert dmr.bootstrap_timeout(dm) == dmr.DEFAULT_BOOTSTRAP_TIMEOUT and dmr.extra_mounts(dm) == ()


@pytest.mark.parametrize("dc", [docker("DockerCluster", CLUSTER_FIELDS), dev("DevCluster", CLUSTER_FIELDS)])
def test_cluster_decisions_read_the_backend(dc: dict[str, Any]) -> None:
    assert dcr.lb_image(dc) == "reg.example/haproxy:t1"
    st = dcr.status(dc, dcr.LBState(True, "", ""), True)
    assert st["failureDomains"] == [{"name": "fd1", "controlPlane": True}]


def test_a_dev_pool_makes_dev_machines_with_the_docker_backend() -> None:
    pool = {**dev("DevMachinePool", {"customImage": "i:1", "preLoadImages": []}),
            "status": {}}
    mp = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
          "metadata": {"name": "c1-mp-0", "namespace": "ns", "uid": "uid-mp"},
          "spec": {"clusterName": "c1", "replicas": 1, "template": {"spec": {"version": "v1.34.4"}}}}
    dm = rdmp.new_docker_machine(pool, mp, "c1-mp-0-abcde")
    assert dm["kind"] == "DevMachine" and dm["spec"] == {"backend": {"docker": {"customImage": "i:1"}}}
    docker_pool = docker("DockerMachinePool", {"template": {"customImage": "i:1", "preLoadImages": []}})
    assert rdmp.template_hash(pool, mp) == rdmp.template_hash(docker_pool, mp)  # the same instance
    st = rdmp.compute_status(pool, mp, [])
    assert st["infrastructureMachineKind"] == "DevMachine"
    assert rdmp.compute_status(docker_pool, mp, [])["infrastructureMachineKind"] == "DockerMachine"
