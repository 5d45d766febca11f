"""`capd-py generate cluster` output is accepted as is by a real API server with the capd-py CRDs."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from capd_py.api.gvk import CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE_DEPLOYMENT, MACHINE_POOL
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.cli.main import app
from capd_py.kube.client import Kube

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


async def test_generated_cluster_applies(kube: Kube, namespace: str) -> None:
    docs = parse_documents(generate_cluster("demo", namespace=namespace, control_plane_machine_count=3,
                                            worker_machine_count=2, env={}))
    out = await apply_objects(kube, docs)
    assert [o.ok for o in out] == [True] * 9, [o.detail for o in out if not o.ok]
    assert {o.detail for o in out} == {"created"}
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, namespace, "demo-control-plane")
    assert kcp and kcp["spec"]["replicas"] == 3
    assert kcp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"][0] == {
        "name": "fail-cgroupv1", "value": "false"}
    md = await kube.get(MACHINE_DEPLOYMENT, namespace, "demo-md-0")
    assert md and md["spec"]["replicas"] == 2
    cl = await kube.get(CLUSTER, namespace, "demo")
    assert cl and cl["spec"]["infrastructureRef"]["kind"] == "DockerCluster"
    # applying the same thing again changes nothing
    again = await apply_objects(kube, parse_documents(generate_cluster(
        "demo", namespace=namespace, control_plane_machine_count=3, worker_machine_count=2, env={})))
    assert {o.detail for o in again} == {"unchanged"}


async def test_machinepool_flavor_applies(kube: Kube, namespace: str) -> None:
    """`--flavor machinepool`: a server-side dry run of every object, then the real server-side apply."""
    def docs() -> list[dict[str, Any]]:
        return parse_documents(generate_cluster("mp", namespace=namespace, worker_machine_count=2,
                                                flavor="machinepool", env={}))
    dry = await apply_objects(kube, docs(), dry_run=True)
    assert [o.ok for o in dry] == [True] * 9, [o.detail for o in dry if not o.ok]
    assert await kube.get(MACHINE_POOL, namespace, "mp-mp-0") is None
    out = await apply_objects(kube, docs())
    assert [o.ok for o in out] == [True] * 9, [o.detail for o in out if not o.ok]
    assert {o.detail for o in out} == {"created"}
    mp = await kube.get(MACHINE_POOL, namespace, "mp-mp-0")
    assert mp and mp["spec"]["replicas"] == 2
    assert mp["spec"]["template"]["spec"]["infrastructureRef"]["kind"] == "DockerMachinePool"
    assert await kube.get(MACHINE_DEPLOYMENT, namespace, "mp-md-0") is None
    assert {o.detail for o in await apply_objects(kube, docs())} == {"unchanged"}


async def test_rejected_object_reported(kube: Kube, namespace: str) -> None:
    docs: list[dict[str, Any]] = parse_documents(generate_cluster("bad", namespace=namespace, env={}))
    md = next(d for d in docs if d["kind"] == "MachineDeployment")
    md["spec"]["replicas"] = "three"
    docs.append({"apiVersion": "example.com/v1", "kind": "Nope", "metadata": {"name": "x"}})
    out = {o.ref: o for o in await apply_objects(kube, docs)}
    bad = out[f"MachineDeployment/{namespace}/bad-md-0"]
    assert not bad.ok and "rejected" in bad.detail and "replicas" in bad.detail
    assert not out["Nope/x"].ok and "example.com/v1" in out["Nope/x"].detail
    assert out[f"Cluster/{namespace}/bad"].ok


def test_cli_generate_then_apply(envtest: Any, namespace: str) -> None:
    runner = CliRunner()
    gen = runner.invoke(app, ["generate", "cluster", "cli-demo", "-n", namespace], env={})
    assert gen.exit_code == 0, gen.output
    r = runner.invoke(app, ["apply", "-f", "-", "--kubeconfig", str(envtest.kubeconfig_path)], input=gen.stdout)
    assert r.exit_code == 0, r.output
    assert f"Cluster/{namespace}/cli-demo created" in r.stdout
    bad = gen.stdout.replace("replicas: 1\n  selector", "replicas: many\n  selector")
    r = runner.invoke(app, ["apply", "-f", "-", "--kubeconfig", str(envtest.kubeconfig_path)], input=bad)
    assert r.exit_code == 1
    assert "rejected" in r.output
