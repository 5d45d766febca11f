"""Upstream `clusterctl init` (the real v1.13.6 binary) installs capd-py from the repository `capd-py clusterctl
repository` writes, on an empty envtest API server; `clusterctl upgrade plan` and `clusterctl delete --all` work on
it, and `clusterctl upgrade apply` takes it to the next capd-py release (docs/clusterctl.md "Installing capd-py with
clusterctl").

envtest has no nodes and runs no controllers: the Deployment never becomes Ready (clusterctl does not wait for it
unless asked to with --wait-providers), so the test checks what clusterctl installed and recorded. cert-manager:
clusterctl refuses to go on without a cert-manager API (shown first); then the test stands one in with
`clusterctl.cert_manager_api_crds()` (what clusterctl probes), as a cluster with cert-manager installed has it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import features
from capd_py.api.gvk import CRD, GVK, NAMESPACE, PROVIDER
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube import admission_webhook
from capd_py.kube import conversion_webhook as cw
from capd_py.kube.admission_webhook import MUTATING_NAME, VALIDATING_NAME
from capd_py.kube.client import Kube
from capd_py.kube.components import write_repository
from capd_py.kube.crds import install_crds, load_crds
from capd_py.reconcile import servingcert
from capd_py.testing import clusterctl
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.docker_free]
Obj = dict[str, Any]

DEPLOYMENT = GVK("apps", "v1", "Deployment", "deployments")
SERVICE = GVK("", "v1", "Service", "services")
SERVICE_ACCOUNT = GVK("", "v1", "ServiceAccount", "serviceaccounts")
ROLE = GVK("rbac.authorization.k8s.io", "v1", "Role", "roles")
CLUSTER_ROLE = GVK("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", namespaced=False)
CLUSTER_ROLE_BINDING = GVK("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings",
                           namespaced=False)
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
               "mutatingwebhookconfigurations", namespaced=False)
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", namespaced=False)
INIT = ["init", "--core", "cluster-api", "--bootstrap", "kubeadm", "--control-plane", "kubeadm",
        "--infrastructure", "docker"]
NEXT_RELEASE = "v1.13.99"  # a later capd-py release in the same contract, for `clusterctl upgrade apply`
NAMESPACES = {"cluster-api": "capi-system", "bootstrap-kubeadm": "capi-kubeadm-bootstrap-system",
              "control-plane-kubeadm": "capi-kubeadm-control-plane-system", "infrastructure-docker": "capd-system"}


@pytest.fixture
def empty() -> Iterator[EnvTest]:
    # with the namespace controller: clusterctl's cert-manager probe deletes its namespace cert-manager-test, and
    # the next init's probe fails while it is still terminating (then clusterctl goes for GitHub)
    with EnvTest(controller_manager=True) as env:
        yield env


def _probe_namespace_gone(env: EnvTest, timeout: float = 60.0) -> None:
    async def go(k: Kube) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while await k.get(NAMESPACE, None, "cert-manager-test") is not None:
            assert asyncio.get_running_loop().time() < deadline, "namespace cert-manager-test not deleted"
            await asyncio.sleep(0.2)
    _in(env, go)


def _in(env: EnvTest, fn: Any) -> Any:
    async def go() -> Any:
        k = env.kube()
        try:
            return await fn(k)
        finally:
            k.close()
    return asyncio.run(go())


def test_clusterctl_init_upgrade_and_delete(clusterctl_binary: Path, empty: EnvTest, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_repository(tmp_path / "repository")
    kc = str(empty.kubeconfig_path)

    # without a cert-manager API clusterctl fetches cert-manager (`cert-manager.url`; by default from GitHub, which
    # fails here after ~2 minutes of retries, docs/clusterctl.md) and stops there, before any provider: shown with a
    # local URL that does not exist, which fails at once
    no_cert_manager = tmp_path / "no-cert-manager.yaml"
    no_cert_manager.write_text(config.read_text() + yaml.safe_dump(
        {"cert-manager": {"url": (tmp_path / "missing" / "cert-manager" / "v1.21.1" / "cert-manager.yaml").as_uri()}}))
    r = clusterctl.run([*INIT, "--kubeconfig", kc], no_cert_manager, tmp_path, check=False)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "cert-manager" in out and "Installing provider" not in out, out

    async def nothing(k: Kube) -> None:
        assert await k.get(CRD, None, "clusters.cluster.x-k8s.io") is None
        assert await k.get(NAMESPACE, None, "capd-system") is None
    _in(empty, nothing)

    # with one (a test double: its CRDs, which is what clusterctl probes)
    _in(empty, lambda k: install_crds(k, crds=clusterctl.cert_manager_api_crds()))

    # clusterctl takes its variables from the environment: the defaults asserted below must not be the caller's
    # (`make test` exports CAPD_PY_PRIVILEGED_MODE=restricted on this host)
    for var in ("CAPD_PY_PRIVILEGED_MODE", "CAPD_PY_NETWORK_POOL", *features.INIT_VARIABLES):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("EXP_MACHINE_POOL", "false")  # a clusterctl variable, as for upstream's core provider
    monkeypatch.setenv("CAPD_PY_NETWORK", "mgmt-net")
    r = clusterctl.run([*INIT, "--kubeconfig", kc], config, tmp_path)
    out = r.stdout + r.stderr
    assert "Skipping installing cert-manager as it is already installed" in out, out
    for label in NAMESPACES:
        assert f'Installing provider="{label}" version="{CLUSTER_API_VERSION}"' in out, out

    async def installed(k: Kube) -> None:
        providers = {p["metadata"]["name"]: p for p in await k.list(PROVIDER, None)}
        assert {n: (p["metadata"]["namespace"], p["version"]) for n, p in providers.items()} == {
            n: (ns, CLUSTER_API_VERSION) for n, ns in NAMESPACES.items()}
        assert (providers["cluster-api"]["providerName"], providers["cluster-api"]["type"]) == (
            "cluster-api", "CoreProvider")
        assert providers["infrastructure-docker"]["type"] == "InfrastructureProvider"
        # every capd-py CRD, labelled as clusterctl labels components (its move and delete find them so)
        crds = {c["metadata"]["name"]: c for c in await k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io")}
        assert set(crds) == {c["metadata"]["name"] for c in load_crds()}
        assert crds["kubeadmconfigs.bootstrap.cluster.x-k8s.io"]["metadata"]["labels"][
            "cluster.x-k8s.io/provider"] == "bootstrap-kubeadm"
        assert crds["dockermachines.infrastructure.cluster.x-k8s.io"]["metadata"]["labels"][
            "cluster.x-k8s.io/provider"] == "infrastructure-docker"
        clusters = crds["clusters.cluster.x-k8s.io"]
        # clusterctl moved the reference into the core provider's namespace (the controllers point it back)
        assert clusters["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"] == "capi-system"
        assert {v["name"] for v in clusters["spec"]["versions"]} == {"v1beta1", "v1beta2"}
        # CRD patterns with `$` survive clusterctl's variable substitution
        assert "$" in str(clusters["spec"]["versions"])
        # the one Deployment, the infrastructure provider's as upstream CAPD's (one replica, the pod label upstream's
        # e2e framework finds it by), variables substituted
        dep = await k.get(DEPLOYMENT, "capd-system", "capd-py-controllers")
        assert dep is not None
        assert dep["metadata"]["labels"]["cluster.x-k8s.io/provider"] == "infrastructure-docker"
        assert dep["spec"]["replicas"] == 1
        assert dep["spec"]["template"]["metadata"]["labels"]["control-plane"] == "controller-manager"
        c = dep["spec"]["template"]["spec"]["containers"][0]
        assert c["image"] == "docker.io/capd-py/controllers:dev"
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["CAPD_PY_NETWORK"] == "mgmt-net" and env["CAPD_PY_PRIVILEGED_MODE"] == "privileged"
        assert env["CAPD_PY_FEATURE_GATES"].startswith("MachinePool=false,ClusterTopology=true,")
        assert [d["metadata"]["name"] for d in await k.list(DEPLOYMENT, None)] == ["capd-py-controllers"]
        for g, ns, name in ((SERVICE, "capd-system", "capd-py-webhook"),
                            (SERVICE_ACCOUNT, "capd-system", "capd-py-controllers"),
                            (MUTATING, None, MUTATING_NAME), (VALIDATING, None, VALIDATING_NAME)):
            o = await k.get(g, ns, name)
            assert o is not None and o["metadata"]["labels"]["clusterctl.cluster.x-k8s.io"] == "", (g.kind, name)
        for ns in NAMESPACES.values():
            assert await k.get(NAMESPACE, None, ns) is not None
    _in(empty, installed)

    # clusterctl moved each provider's CRDs' conversion Service into that provider's namespace (components.go,
    # fixCRDWebhookNamespaceReference), where there is none; the controllers' webhook loop points them back at the
    # Service the infrastructure provider's CRDs name (theirs, in capd-system) and writes its CA (what run_webhook
    # does at start, here without serving)
    async def conversion_services(k: Kube) -> dict[str, str]:
        return {c["metadata"]["name"]: c["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"]
                for c in await k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io")
                if (c["spec"].get("conversion") or {}).get("strategy") == "Webhook"}
    before = _in(empty, conversion_services)
    assert before["kubeadmconfigs.bootstrap.cluster.x-k8s.io"] == "capi-kubeadm-bootstrap-system"
    assert before["dockermachines.infrastructure.cluster.x-k8s.io"] == "capd-system"
    assert before["clusters.cluster.x-k8s.io"] == "capi-system"
    ca = servingcert.new_webhook_ca().cert

    async def fix(k: Kube) -> None:
        core = (await cw.served_conversion(k) or {})["webhook"]["clientConfig"]["service"]
        await cw.ensure_ca_bundle(k, ca, service=core)
        await admission_webhook.ensure_ca_bundle(k, ca)
        assert await cw.ensure_ca_bundle(k, ca, service=core) == []  # a second pass writes nothing
        for c in await k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io"):
            assert servingcert.client_config_patch(c["spec"].get("conversion"), ca, core) is None
    _in(empty, fix)
    assert set(_in(empty, conversion_services).values()) == {"capd-system"}

    # upgrade plan: the four providers at the repository's version; cert-manager is not clusterctl's (no labels)
    out = clusterctl.run(["upgrade", "plan", "--kubeconfig", kc], config, tmp_path).stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    for name, ns in NAMESPACES.items():
        assert name in rows and ns in rows[name] and CLUSTER_API_VERSION in rows[name], out
    assert "You are already up to date!" in out, out

    # init again: nothing to do (same providers, same version)
    _probe_namespace_gone(empty)
    again = clusterctl.run([*INIT, "--kubeconfig", kc], config, tmp_path)
    assert "Installing provider" not in again.stdout + again.stderr

    # delete --all: every component but the CRDs and the namespaces (clusterctl keeps them unless asked), and the
    # cluster-scoped RBAC, which clusterctl deletes only when its name starts with "<namespace>-" (upstream's own
    # ClusterRoles stay too)
    r = clusterctl.run(["delete", "--all", "--kubeconfig", kc], config, tmp_path)

    async def deleted(k: Kube) -> None:
        assert await k.list(PROVIDER, None) == []
        assert await k.get(DEPLOYMENT, "capd-system", "capd-py-controllers") is None
        for g, ns, name in ((SERVICE, "capd-system", "capd-py-webhook"),
                            (SERVICE_ACCOUNT, "capd-system", "capd-py-controllers"),
                            (ROLE, "capd-system", "capd-py-controllers-leader-election"),
                            (MUTATING, None, MUTATING_NAME), (VALIDATING, None, VALIDATING_NAME)):
            assert await k.get(g, ns, name) is None, (g.kind, name)
        assert await k.get(CRD, None, "clusters.cluster.x-k8s.io") is not None
        assert await k.get(NAMESPACE, None, "capd-system") is not None
        left = [name for g, name in ((CLUSTER_ROLE, "capd-py-controllers"),
                                     (CLUSTER_ROLE, "capd-py-controllers-aggregated"),
                                     (CLUSTER_ROLE_BINDING, "capd-py-controllers-aggregated"))
                if await k.get(g, None, name) is not None]
        assert left == ["capd-py-controllers", "capd-py-controllers-aggregated", "capd-py-controllers-aggregated"]
    _in(empty, deleted)

    # and back: init after delete installs the four providers again
    _probe_namespace_gone(empty)
    r = clusterctl.run([*INIT, "--kubeconfig", kc], config, tmp_path)
    assert r.stdout.count("Installing provider") + r.stderr.count("Installing provider") == 4
    _in(empty, installed)

    # upgrade apply to the next capd-py release: its repository written into the same directory (as the next
    # release's `capd-py clusterctl repository DIR` does; the config now names its version), then clusterctl's own
    # upgrade within the contract: every provider at the new version, the Deployment running the new image, and the
    # CRDs updated in place (same uid: the objects they hold stay)
    uids = {c["metadata"]["name"]: c["metadata"]["uid"]
            for c in _in(empty, lambda k: k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io"))}
    write_repository(tmp_path / "repository", version=NEXT_RELEASE, image="capd-py/controllers:next")
    plan = clusterctl.run(["upgrade", "plan", "--kubeconfig", kc], config, tmp_path).stdout
    rows = {line.split()[0]: line.split() for line in plan.splitlines() if line.strip()}
    for name in NAMESPACES:
        assert rows[name][-2:] == [CLUSTER_API_VERSION, NEXT_RELEASE], plan  # current version, next version
    r = clusterctl.run(["upgrade", "apply", "--contract", "v1beta2", "--kubeconfig", kc], config, tmp_path)

    async def upgraded(k: Kube) -> None:
        assert {p["metadata"]["name"]: p["version"] for p in await k.list(PROVIDER, None)} == {
            n: NEXT_RELEASE for n in NAMESPACES}
        dep = await k.get(DEPLOYMENT, "capd-system", "capd-py-controllers")
        assert dep is not None
        assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "docker.io/capd-py/controllers:next"
        crds = await k.list(CRD, None, selector="clusterctl.cluster.x-k8s.io")
        assert {c["metadata"]["name"]: c["metadata"]["uid"] for c in crds} == uids
    _in(empty, upgraded)
    latest = clusterctl.run(["upgrade", "plan", "--kubeconfig", kc], config, tmp_path).stdout
    assert "You are already up to date!" in latest, latest
