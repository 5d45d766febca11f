"""Test helpers for the v1beta1 conversion webhook: upstream's v1beta1 manifests, a read-back comparison that
allows the API server's defaults, and a webhook in a process of its own (killed as a crashed controllers
process would be)."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from capd_py.api import gvk, kubeyaml
from capd_py.api.conversion import from_hub, to_hub
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube
from capd_py.kube.conversion_webhook import crds_serving_v1beta1, webhook_conversion
from capd_py.reconcile.servingcert import host_mode_url, new_serving_cert, new_webhook_ca
from capd_py.testing.envtest import EnvTest, free_port, started_with_crds

# every served kind at the hub version, by (group, kind)
KINDS = {(g.group, g.kind): g for g in vars(gvk).values() if isinstance(g, gvk.GVK) and g.version == gvk.VERSION}
UPSTREAM_V1BETA1 = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "upstream" / "v1beta1"

# `python -c WEBHOOK_PROCESS PORT [KUBECONFIG]` with the serving certificate and key in $CERT / $KEY: serves the
# conversion and admission webhooks on 127.0.0.1:PORT (with KUBECONFIG: the KCP scale check reads the KCP there) and
# prints "ready" once it listens
WEBHOOK_PROCESS = """
import asyncio, os, sys
from capd_py.kube.client import Kube
from capd_py.kube.conversion_webhook import serve
async def main():
    kube = Kube.from_kubeconfig(sys.argv[2]) if len(sys.argv) > 2 else None
    await serve("127.0.0.1", int(sys.argv[1]), os.environb[b"CERT"], os.environb[b"KEY"], kube=kube)
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


@contextlib.contextmanager
def started_as_init_does() -> Iterator[EnvTest]:
    """An API server with the CRDs and admission webhook configurations as `capd-py init` installs them (v1beta1
    served through the conversion webhook; defaulting and validating webhooks, failurePolicy Fail), both webhooks
    served by one WEBHOOK_PROCESS until the block ends."""
    port = free_port()
    ca = new_webhook_ca()
    pair = new_serving_cert(ca, ["127.0.0.1"])
    url = host_mode_url("127.0.0.1", port)
    with started_with_crds(crds_serving_v1beta1(webhook_conversion(ca.cert, url=url)),
                           admission_webhook.configurations(ca.cert, url=url)) as started:
        env = {**os.environ, "CERT": pair.cert.decode(), "KEY": pair.key.decode()}
        proc = subprocess.Popen([sys.executable, "-c", WEBHOOK_PROCESS, str(port), str(started.kubeconfig_path)],
                                env=env, stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
            yield started
        finally:
            proc.kill()
            proc.wait()


def at(g: gvk.GVK, version: str) -> gvk.GVK:
    """The same kind at another version."""
    return gvk.GVK(g.group, version, g.kind, g.plural, g.namespaced)


def of(obj: dict[str, Any]) -> gvk.GVK:
    """An object's kind at the version its apiVersion says."""
    group, _, version = obj["apiVersion"].rpartition("/")
    return at(KINDS[(group, obj["kind"])], version)


def contains(actual: Any, expected: Any) -> bool:
    """`expected` is in `actual`: the API server adds defaults (both versions' schemas have some, e.g. v1beta1
    KubeadmControlPlane's rolloutStrategy), so a read-back has more than was written."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return (isinstance(actual, list) and len(actual) == len(expected)
                and all(contains(a, e) for a, e in zip(actual, expected, strict=True)))
    return bool(actual == expected)


def upstream_v1beta1(namespace: str, file: str = "e2e-bases.yaml") -> list[dict[str, Any]]:
    """The Cluster API objects (v1beta1) of an upstream manifest in tests/fixtures/upstream/v1beta1, in `namespace`."""
    out = []
    for d in kubeyaml.load_all((UPSTREAM_V1BETA1 / file).read_text()):
        if d and d["apiVersion"].endswith("cluster.x-k8s.io/v1beta1"):
            d["metadata"]["namespace"] = namespace
            out.append(d)
    return out


async def create_and_read_back(kube: Kube, objs: list[dict[str, Any]]
                               ) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """Create each v1beta1 object as written, then read it back as v1beta2 (what `to_hub` says, with the API
    server's defaults) and as v1beta1 (what was written, through a round trip). Returns (written, hub, spoke)
    per object for the caller's own checks."""
    for obj in objs:
        await kube.create(of(obj), copy.deepcopy(obj))
    out = []
    for obj in objs:
        g, name = of(obj), obj["metadata"]["name"]
        hub = await kube.get(at(g, "v1beta2"), obj["metadata"]["namespace"], name)
        assert hub is not None and hub["apiVersion"].endswith("/v1beta2"), obj["kind"]
        assert contains(hub.get("spec"), to_hub(obj).get("spec")), obj["kind"]
        spoke = await kube.get(g, obj["metadata"]["namespace"], name)
        assert spoke is not None and spoke["apiVersion"].endswith("/v1beta1"), obj["kind"]
        assert contains(spoke.get("spec"), from_hub(to_hub(obj)).get("spec")), obj["kind"]
        out.append((obj, hub, spoke))
    return out
