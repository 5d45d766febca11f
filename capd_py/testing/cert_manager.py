"""A real cert-manager in a management cluster, for upstream `clusterctl init` (and upstream Cluster API's e2e
framework, which calls it): clusterctl installs no provider until a cert-manager API answers its probe, and would
otherwise download cert-manager's manifest from GitHub and its images from quay.io, neither reachable here
(docs/clusterctl.md "cert-manager").

`hack/build-cert-manager.sh` (`make cert-manager`) builds cert-manager from source into the cache: the controller,
webhook and cainjector images tagged as the release names them (quay.io/jetstack/cert-manager-*:VERSION) and the
release's static manifest (`cert-manager.yaml`, `imagePullPolicy: IfNotPresent`). `install_cert_manager` loads the
three images into the nodes' containerd (capd_py/runtime/images.py, as `capd-py load image`), applies the manifest,
waits for the three Deployments, then runs clusterctl's own probe until it passes: an Issuer and a Certificate in
namespace cert-manager-test, created (which needs cert-manager's webhook to answer with the CA the cainjector put in
its configuration), then deleted with their namespace, so a `clusterctl init` right after finds cert-manager
installed ("Skipping installing cert-manager") and can make that namespace again.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from capd_py.runtime import images
from capd_py.runtime.protocol import ContainerRuntime
from capd_py.testing.e2e import kubectl_bin
from capd_py.testing.envtest import cache_dir

log = logging.getLogger("capd_py.testing.cert_manager")

# the version clusterctl v1.14 installs (its CertManagerDefaultVersion) and upstream's e2e config names
DEFAULT_VERSION = "v1.21.1"
COMPONENTS = ("controller", "webhook", "cainjector")
NAMESPACE = "cert-manager"
DEPLOYMENTS = ("cert-manager", "cert-manager-webhook", "cert-manager-cainjector")
MAKE_HINT = ("build it with `make cert-manager` (hack/build-cert-manager.sh, from the Go module proxy and the source "
             "bundle in hack/third_party; a cached build re-creates missing images in seconds)")


def self_signed_certificate(namespace: str, issuer: str, certificate: str, dns_name: str, secret: str) -> str:
    """A Namespace, a self-signed Issuer in it and a Certificate for `dns_name` from that Issuer into `secret`."""
    return f"""\
apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {issuer}
  namespace: {namespace}
spec:
  selfSigned: {{}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {certificate}
  namespace: {namespace}
spec:
  dnsNames:
  - {dns_name}
  secretName: {secret}
  issuerRef:
    name: {issuer}
"""


# clusterctl's probe (cmd/clusterctl/client/cluster/assets/cert-manager-test-resources.yaml)
PROBE_NAMESPACE = "cert-manager-test"
PROBE = self_signed_certificate(PROBE_NAMESPACE, "test-selfsigned", "selfsigned-cert", "example.com",
                                "selfsigned-cert-tls")


class CertManagerError(Exception):
    """cert-manager could not be installed, or did not answer in time: says why."""


def root(version: str = DEFAULT_VERSION) -> Path:
    return cache_dir() / "cert-manager" / version


def manifest(version: str = DEFAULT_VERSION) -> Path:
    return root(version) / "cert-manager.yaml"


def image_refs(version: str = DEFAULT_VERSION) -> list[str]:
    return [f"quay.io/jetstack/cert-manager-{c}:{version}" for c in COMPONENTS]


def missing(runtime: ContainerRuntime, version: str = DEFAULT_VERSION) -> str | None:
    """Why cert-manager `version` cannot be installed from this machine (None: it can)."""
    if not (root(version) / ".complete").is_file() or not manifest(version).is_file():
        return f"cert-manager {version} is not built ({root(version)}): {MAKE_HINT}"
    absent = [r for r, i in images.local_ids(runtime, image_refs(version)).items() if i is None]
    if absent:
        return f"cert-manager {version}'s images are not in the docker daemon ({', '.join(absent)}): {MAKE_HINT}"
    return None


def _kubectl(kubeconfig: Path, *args: str, input_: str | None = None, timeout: float = 120) -> str:
    cmd = [kubectl_bin(), f"--kubeconfig={kubeconfig}", *args]
    try:
        p = subprocess.run(cmd, input=input_, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise CertManagerError(f"kubectl {' '.join(args)}: no answer in {timeout:.0f} s") from e
    if p.returncode != 0:
        why = (p.stderr or p.stdout).strip()[-800:]
        raise CertManagerError(f"kubectl {' '.join(args)} exited {p.returncode}: {why}")
    return p.stdout


def load_images(runtime: ContainerRuntime, node_containers: list[str], version: str = DEFAULT_VERSION) -> None:
    """The three images into every node's containerd (an image a node has with the same ID is skipped)."""
    why = missing(runtime, version)
    if why:
        raise CertManagerError(why)
    ids = {r: i for r, i in images.local_ids(runtime, image_refs(version)).items() if i is not None}
    bad = [o for o in images.load_images(runtime, node_containers, ids) if not o.ok]
    if bad:
        raise CertManagerError("loading cert-manager's images failed: " +
                               "; ".join(f"{o.node}: {o.ref}: {o.detail}" for o in bad))


def probe(kubeconfig: Path, timeout: float = 120.0) -> None:
    """clusterctl's check that cert-manager answers: create its Issuer and Certificate (retried while the webhook
    refuses or cannot be reached), then delete them and their namespace and wait until it is gone."""
    def create() -> None:
        _kubectl(kubeconfig, "apply", "-f", "-", input_=PROBE)

    Retrying(retry=retry_if_exception_type(CertManagerError), stop=stop_after_delay(timeout), wait=wait_fixed(2),
             reraise=True)(create)
    _kubectl(kubeconfig, "delete", "namespace", PROBE_NAMESPACE, "--wait=true", f"--timeout={int(timeout)}s",
             timeout=timeout + 10)


def install_cert_manager(kubeconfig: Path, node_containers: list[str], version: str = DEFAULT_VERSION,
                         runtime: ContainerRuntime | None = None, timeout: float = 300.0) -> None:
    """cert-manager `version` (built by hack/build-cert-manager.sh) into the cluster of `kubeconfig` whose nodes are
    the containers `node_containers`: images loaded, the release manifest applied, the Deployments Available and
    clusterctl's Issuer + Certificate probe passed. Idempotent. Raises CertManagerError."""
    if runtime is None:
        from capd_py.runtime.docker_runtime import DockerRuntime
        runtime = DockerRuntime()
    t0 = time.monotonic()
    load_images(runtime, node_containers, version)
    t1 = time.monotonic()
    # server-side: idempotent, and no last-applied annotation (a client-side `kubectl apply -f` works too, measured:
    # the largest, ClusterIssuer's CRD, gets a 147 KB one, within the 256 KiB limit)
    _kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=capd-py", "-f",
             str(manifest(version)), timeout=timeout)
    left = max(30.0, timeout - (time.monotonic() - t1))
    _kubectl(kubeconfig, "-n", NAMESPACE, "wait", "--for=condition=Available",
             *(f"deployment/{d}" for d in DEPLOYMENTS), f"--timeout={int(left)}s", timeout=left + 10)
    t2 = time.monotonic()
    probe(kubeconfig, timeout=max(30.0, timeout - (time.monotonic() - t1)))
    t3 = time.monotonic()
    log.info("cert-manager %s installed in %.1f s (images %.1f s, Deployments Available %.1f s, webhook probe %.1f s)",
             version, t3 - t0, t1 - t0, t2 - t1, t3 - t2)


def certificate(kubeconfig: Path, namespace: str, name: str) -> dict[str, Any] | None:
    """The Certificate as the API server has it (None when absent)."""
    try:
        out = _kubectl(kubeconfig, "-n", namespace, "get", "certificates.cert-manager.io", name, "-o", "json")
    except CertManagerError as e:
        if "NotFound" in str(e):
            return None
        raise
    obj: dict[str, Any] = json.loads(out)
    return obj


def ready(cert: dict[str, Any] | None) -> bool:
    """The Certificate's Ready condition is True."""
    conds = ((cert or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)
