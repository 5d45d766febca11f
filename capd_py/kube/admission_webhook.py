"""The defaulting and validating admission webhooks (upstream Cluster API's, rules in capd_py.api.admission), served
by the same HTTPS server and certificate as the conversion webhook (capd_py.kube.conversion_webhook adds these
routes), and the Mutating/ValidatingWebhookConfigurations that point the API server at it: installed with the
CRDs when they are converted by a webhook (capd-py init), failurePolicy Fail, sideEffects None."""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from capd_py.api import features
from capd_py.api.admission import KINDS, admit, webhook_name
from capd_py.api.admission.fielderrors import FieldError
from capd_py.api.admission.review import SCALE, VERSION, ExtraDefaulting, ExtraValidation
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_CLASS,
    GVK,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
)
from capd_py.api.labels import CLUSTER_NAME, TOPOLOGY_OWNED
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.contracts import Contracts, Unresolved
from capd_py.kube.crds import load_crds
from capd_py.reconcile.topology import classchecks

log = logging.getLogger(__name__)

MUTATE_PATH = "/mutate"
VALIDATE_PATH = "/validate"
MUTATING = GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
               "mutatingwebhookconfigurations", namespaced=False)
VALIDATING = GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", namespaced=False)
MUTATING_NAME = "capd-py-mutating-webhook-configuration"
VALIDATING_NAME = "capd-py-validating-webhook-configuration"
TIMEOUT_SECONDS = 10
SCALE_WEBHOOK = "validation-scale.kubeadmcontrolplane.controlplane.cluster.x-k8s.io"


def gates_from_environment() -> dict[str, bool]:
    """The feature gates the controllers run with (`--feature-gates` / CAPD_PY_FEATURE_GATES, as
    controllers/context.py reads them): the rules depend on some (MachineTaintPropagation, MachinePool, ...).
    A value the controllers would refuse at start falls back to the defaults here."""
    try:
        return features.parse(os.environ.get("CAPD_PY_FEATURE_GATES", ""))
    except ValueError:
        return dict(features.DEFAULTS)


async def answer(body: Any, mutate: bool, kube: Kube | None, gates: Mapping[str, bool] | None = None
                 ) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body answering the AdmissionReview `body` (a KCP scale request reads the KCP)."""
    if not isinstance(body, dict) or not isinstance(body.get("request"), dict):
        return 400, {"message": "not an AdmissionReview"}
    req = body["request"]
    kcp: dict[str, Any] | None = None
    resource = req.get("resource") or {}
    if not mutate and (resource.get("group"), resource.get("resource"), req.get("subResource")) == SCALE:
        if kube is None:
            return 200, _errored(req, "no API client to read the KubeadmControlPlane")
        try:
            kcp = await kube.get(KUBEADM_CONTROL_PLANE, req.get("namespace"), req.get("name", ""))
        except KubeError as e:
            return 200, _errored(req, f"failed to get KubeadmControlPlane {req.get('namespace')}/{req.get('name')}: "
                                      f"{e}")
    extra_defaulting: ExtraDefaulting | None = None
    extra_validation: ExtraValidation | None = None
    if (resource.get("group"), resource.get("resource")) == CLUSTERS and kube is not None \
            and not req.get("subResource") and req.get("operation") in ("CREATE", "UPDATE") \
            and ((req.get("object") or {}).get("spec") or {}).get("topology") \
            and not ((req.get("object") or {}).get("metadata") or {}).get("deletionTimestamp"):
        # (a Cluster being deleted only loses finalizers: never held up by its class, whatever became of it)
        try:
            # the defaulting webhook waits for a class being reconciled; the validating one takes what is there
            cc, ready = await cluster_class(kube, req.get("object") or {}, req.get("namespace") or "", wait=mutate)
        except KubeError as e:
            return 200, _errored(req, f"Cluster {req.get('name', '')} can't be defaulted. ClusterClass can not be "
                                      f"retrieved: {e}")
        if mutate and cc is not None and ready:
            extra_defaulting = functools.partial(_defaulted_by, cc)
        if not mutate:
            state = await upgrade_state(kube, req.get("oldObject"), req.get("object") or {},
                                        req.get("namespace") or "") if cc is not None else None
            extra_validation = functools.partial(_validated_by, cc, state)
    if not mutate and (resource.get("group"), resource.get("resource")) == CLUSTER_CLASSES \
            and not req.get("subResource"):
        extra_validation = _clusterclass_validated
    out = admit(body, mutate, read=lambda _ns, _name: kcp, gates=gates, extra_defaulting=extra_defaulting,
                extra_validation=extra_validation,
                schema=served_schemas().get((resource.get("group", ""), resource.get("resource", ""))))
    response = out["response"]
    if not response["allowed"]:
        log.info("admission refused %s %s/%s: %s", req.get("operation"), req.get("namespace"), req.get("name"),
                 response["status"]["message"])
    return 200, out


@functools.cache
def served_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(group, plural) -> the openAPIV3Schema of the version the webhooks see (v1beta2), from capd-py's CRDs."""
    out = {}
    for crd in load_crds():
        for v in crd["spec"]["versions"]:
            if v["name"] == VERSION:
                out[(crd["spec"]["group"], crd["spec"]["names"]["plural"])] = v["schema"]["openAPIV3Schema"]
    return out


CLUSTERS = (CLUSTER.group, CLUSTER.plural)
CLUSTER_CLASSES = (CLUSTER_CLASS.group, CLUSTER_CLASS.plural)
# upstream's pollClusterClassForCluster: a class created just before the Cluster gets this long to be reconciled
CLASS_POLL, CLASS_POLL_INTERVAL = 2.0, 0.2


async def cluster_class(kube: Kube, cluster: dict[str, Any], namespace: str, wait: bool = True
                        ) -> tuple[dict[str, Any] | None, bool]:
    """A topology Cluster's ClusterClass and whether it is reconciled. With `wait`, a class that exists but is not
    reconciled yet (created just before the Cluster) gets up to CLASS_POLL, as upstream's poll gives it; a class that
    does not exist gets no wait (upstream polls for it too, but an apply sends its objects one after the other: a
    class that is missing when its Cluster arrives does not appear meanwhile). Upstream defaults and checks the
    variables only against a reconciled class; its other checks take the class as it is."""
    topo = (cluster.get("spec") or {}).get("topology")
    ref = topo.get("classRef") if isinstance(topo, dict) else None
    if not isinstance(ref, dict) or not ref.get("name"):
        return None, False
    deadline = time.monotonic() + CLASS_POLL
    while True:
        cc = await kube.get(CLUSTER_CLASS, ref.get("namespace") or namespace, str(ref["name"]))
        if cc is None or classchecks.reconciled(cc):
            return cc, cc is not None
        if not wait or time.monotonic() >= deadline:
            return cc, False
        await asyncio.sleep(CLASS_POLL_INTERVAL)


def _defaulted_by(cc: dict[str, Any], cluster: dict[str, Any], old: dict[str, Any] | None
                  ) -> tuple[dict[str, Any], list[FieldError]]:
    return classchecks.default_and_validate_variables(cluster, old, cc)


def _clusterclass_validated(cc: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    return classchecks.validate_clusterclass(cc, old)


def _validated_by(cc: dict[str, Any] | None, state: classchecks.UpgradeState | None, cluster: dict[str, Any],
                  old: dict[str, Any] | None) -> list[FieldError]:
    return classchecks.validate_cluster_for_class(cluster, old, cc, state)


async def upgrade_state(kube: Kube, old: dict[str, Any] | None, cluster: dict[str, Any], namespace: str
                        ) -> classchecks.UpgradeState | None:
    """What upstream's validateTopologyVersionUpdate reads when an update changes a topology Cluster's version (None
    otherwise: nothing to read): the control plane the old Cluster names, the MachineDeployments and MachinePools the
    topology owns, the Cluster's Machines. A failed read is named, as upstream wraps it into the refusal."""
    if old is None or not classchecks.version_update_checked(cluster, old):
        return None
    name = str((old.get("metadata") or {}).get("name") or "")
    owned = {CLUSTER_NAME: name, TOPOLOGY_OWNED: ""}
    control_plane, unread = None, ""
    ref = (old.get("spec") or {}).get("controlPlaneRef") or {}
    try:
        resolved = await Contracts(kube).resolve(str(ref.get("apiGroup") or ""), str(ref.get("kind") or ""))
        control_plane = await kube.get(resolved.gvk, namespace, str(ref.get("name") or ""))
    except (Unresolved, KubeError) as e:
        unread = f"failed to check if control plane is upgrading: failed to get control plane object: {e}"
    try:
        return classchecks.UpgradeState(
            control_plane=control_plane, unread=unread,
            machine_deployments=tuple(await kube.list(MACHINE_DEPLOYMENT, namespace, labels=owned)),
            machines=tuple(await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})),
            machine_pools=tuple(await kube.list(MACHINE_POOL, namespace, labels=owned)))
    except KubeError as e:
        return classchecks.UpgradeState(control_plane=control_plane,
                                        unread=unread or f"failed to check if workers are upgrading: {e}")


def _handler(mutate: bool, kube: Kube | None, gates: Mapping[str, bool]) -> Any:
    async def handle(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return web.json_response({"message": f"not JSON: {exc}"}, status=400)
        status, out = await answer(body, mutate, kube, gates)
        return web.json_response(out, status=status)
    return handle


def _errored(req: dict[str, Any], message: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": req.get("uid", ""), "allowed": False,
                         "status": {"status": "Failure", "message": message, "code": 500}}}


def add_routes(application: web.Application, kube: Kube | None = None,
               gates: Mapping[str, bool] | None = None) -> None:
    """`gates`: the feature gates the rules follow (default: the controllers', gates_from_environment)."""
    chosen = dict(gates) if gates is not None else gates_from_environment()
    application.router.add_post(MUTATE_PATH, _handler(True, kube, chosen))
    application.router.add_post(VALIDATE_PATH, _handler(False, kube, chosen))


def _client(ca_pem: bytes, path: str, url: str | None, service: dict[str, Any] | None) -> dict[str, Any]:
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_pem).decode()}
    if url is not None:
        from urllib.parse import urlsplit, urlunsplit
        parts = urlsplit(url)
        client["url"] = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    else:
        client["service"] = {**(service or {}), "path": path}
    return client


def _webhook(name: str, client: dict[str, Any], group: str, resources: list[str], operations: list[str],
             mutating: bool, scope: str = "Namespaced") -> dict[str, Any]:
    hook: dict[str, Any] = {
        "name": name, "clientConfig": copy.deepcopy(client),
        "rules": [{"apiGroups": [group], "apiVersions": [VERSION], "operations": operations,
                   "resources": resources, "scope": scope}],
        "failurePolicy": "Fail", "matchPolicy": "Equivalent", "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "timeoutSeconds": TIMEOUT_SECONDS,
    }
    if mutating:
        hook["reinvocationPolicy"] = "Never"
    return hook


def configurations(ca_pem: bytes, *, url: str | None = None, service: dict[str, Any] | None = None
                   ) -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration for every kind with upstream webhooks
    (capd_py.api.admission.KINDS), by URL (host mode: the conversion webhook's URL, other path) or by Service."""
    if (url is None) == (service is None):
        raise ValueError("exactly one of url and service")
    mutate, validate = _client(ca_pem, MUTATE_PATH, url, service), _client(ca_pem, VALIDATE_PATH, url, service)
    ops = ["CREATE", "UPDATE"]
    mutating = [_webhook(webhook_name("default", k), mutate, k.group, [k.resource], ops, True, k.scope)
                for k in KINDS if k.default is not None]
    validating = [_webhook(webhook_name("validation", k), validate, k.group, [k.resource], ops, False, k.scope)
                  for k in KINDS if k.validate is not None]
    group, resource, sub = SCALE
    validating.append(_webhook(SCALE_WEBHOOK, validate, group, [f"{resource}/{sub}"], ["UPDATE"], False))
    labels = {"app.kubernetes.io/managed-by": "capd-py"}
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": MUTATING_NAME, "labels": labels}, "webhooks": mutating},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": VALIDATING_NAME, "labels": labels}, "webhooks": validating},
    ]


def _gvk(config: dict[str, Any]) -> GVK:
    return MUTATING if config["kind"] == "MutatingWebhookConfiguration" else VALIDATING


async def install(kube: Kube, configs: list[dict[str, Any]]) -> None:
    """Server-side apply both configurations (field manager capd-py)."""
    for config in configs:
        await kube.apply(_gvk(config), config)


async def remove(kube: Kube) -> list[str]:
    """Delete both configurations (CRDs installed without a webhook: nothing would answer). Returns those deleted."""
    gone = []
    for gvk, name in ((MUTATING, MUTATING_NAME), (VALIDATING, VALIDATING_NAME)):
        if await kube.delete(gvk, None, name):
            gone.append(name)
    return gone


async def ensure_ca_bundle(kube: Kube, ca_pem: bytes) -> list[str]:
    """Every webhook of both configurations (when installed) trusts `ca_pem`; returns the configurations patched."""
    bundle = base64.b64encode(ca_pem).decode()
    patched = []
    for gvk, name in ((MUTATING, MUTATING_NAME), (VALIDATING, VALIDATING_NAME)):
        config = await kube.get(gvk, None, name)
        if config is None:
            continue
        hooks = config.get("webhooks") or []
        if all((h.get("clientConfig") or {}).get("caBundle") == bundle for h in hooks):
            continue
        # "add" replaces a caBundle that is there and adds one that is not (clusterctl installs the configurations
        # without: "replace" of a missing member is refused)
        ops = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
               for i in range(len(hooks))]
        await kube.json_patch(gvk, None, name, [{"op": "test", "path": "/metadata/resourceVersion",
                                                 "value": config["metadata"]["resourceVersion"]}, *ops])
        patched.append(name)
    if patched:
        log.info("admission webhooks' caBundle updated in %s", ", ".join(patched))
    return patched
