"""The kubeadm v1beta4 documents (ClusterConfiguration, InitConfiguration, JoinConfiguration) made from a v1beta2
KubeadmConfigSpec plus the Cluster, and the cloud-config around them (write_files / bootcmd / runcmd / users),
rendered with jinja2 from the text of `templates/bootstrap/*.yaml.j2` (pure: the controllers read the files and
hand them over as `CloudConfigTemplates`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jinja2
import yaml

from capd_py.api import contract
from capd_py.reconcile import certs as certs_mod

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
INIT_CONFIG_PATH = "/run/kubeadm/kubeadm.yaml"
JOIN_CONFIG_PATH = "/run/kubeadm/kubeadm-join-config.yaml"
SENTINEL_PATH = "/run/cluster-api/bootstrap-success.complete"
# Checks that fail inside a container node; kind ignores the same ones (NumCPU/Mem: small hosts).
IGNORE_PREFLIGHT_ERRORS: tuple[str, ...] = (
    "SystemVerification", "Swap", "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables", "NumCPU", "Mem",
)

# ================================================================================================
# kubeadm v1beta4 documents from a v1beta2 KubeadmConfigSpec
# ================================================================================================

_SECONDS_TIMEOUTS = {
    "controlPlaneComponentHealthCheckSeconds": "controlPlaneComponentHealthCheck",
    "kubeletHealthCheckSeconds": "kubeletHealthCheck",
    "kubernetesAPICallSeconds": "kubernetesAPICall",
    "etcdAPICallSeconds": "etcdAPICall",
    "tlsBootstrapSeconds": "tlsBootstrap",
    "discoverySeconds": "discovery",
}
_NODE_REG_KEYS = ("name", "criSocket", "taints", "kubeletExtraArgs", "ignorePreflightErrors",
                  "imagePullPolicy", "imagePullSerial")
_CLUSTER_PASS = ("etcd", "apiServer", "controllerManager", "scheduler", "dns", "certificatesDir",
                 "imageRepository", "featureGates", "encryptionAlgorithm")


def _copy(v: Any) -> Any:
    return json.loads(json.dumps(v))


def _timeouts(t: dict[str, Any] | None) -> dict[str, str]:
    return {dst: f"{int(t[src])}s" for src, dst in _SECONDS_TIMEOUTS.items() if t and t.get(src) is not None}


def _node_registration(nr: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _copy(nr[k]) for k in _NODE_REG_KEYS if nr and k in nr}


def endpoint_string(endpoint: dict[str, Any]) -> str:
    host = str(endpoint["host"])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{int(endpoint['port'])}"


def cluster_configuration(spec: dict[str, Any], cluster: dict[str, Any], version: str) -> dict[str, Any]:
    cc = spec.get("clusterConfiguration") or {}
    doc: dict[str, Any] = {"apiVersion": KUBEADM_API, "kind": "ClusterConfiguration"}
    for k in _CLUSTER_PASS:
        if cc.get(k) not in (None, {}, [], ""):
            doc[k] = _copy(cc[k])
    for src, dst in (("certificateValidityPeriodDays", "certificateValidityPeriod"),
                     ("caCertificateValidityPeriodDays", "caCertificateValidityPeriod")):
        if cc.get(src):
            doc[dst] = f"{int(cc[src]) * 24}h0m0s"
    ep = contract.control_plane_endpoint(cluster)
    cpe = cc.get("controlPlaneEndpoint") or (endpoint_string(ep) if ep else "")
    if cpe:
        doc["controlPlaneEndpoint"] = cpe
    doc["clusterName"] = cluster["metadata"]["name"]
    if version:
        doc["kubernetesVersion"] = version
    net = contract.dig(cluster, "spec", "clusterNetwork", default={}) or {}
    networking: dict[str, str] = {}
    if net.get("serviceDomain"):
        networking["dnsDomain"] = net["serviceDomain"]
    pods = contract.dig(net, "pods", "cidrBlocks", default=[]) or []
    svcs = contract.dig(net, "services", "cidrBlocks", default=[]) or []
    if pods:
        networking["podSubnet"] = ",".join(pods)
    if svcs:
        networking["serviceSubnet"] = ",".join(svcs)
    if networking:
        doc["networking"] = networking
    return doc


def _bootstrap_token(bt: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in ("token", "description", "expires", "usages", "groups"):
        if bt.get(k):
            out[k] = _copy(bt[k])
    if bt.get("ttlSeconds") is not None:
        out["ttl"] = f"{int(bt['ttlSeconds'])}s"
    return out


def init_configuration(spec: dict[str, Any]) -> dict[str, Any]:
    ic = spec.get("initConfiguration") or {}
    doc: dict[str, Any] = {"apiVersion": KUBEADM_API, "kind": "InitConfiguration"}
    if ic.get("bootstrapTokens"):
        doc["bootstrapTokens"] = [_bootstrap_token(t) for t in ic["bootstrapTokens"]]
    nr = _node_registration(ic.get("nodeRegistration"))
    if nr:
        doc["nodeRegistration"] = nr
    for k in ("localAPIEndpoint", "skipPhases", "patches"):
        if ic.get(k):
            doc[k] = _copy(ic[k])
    t = _timeouts(ic.get("timeouts"))
    if t:
        doc["timeouts"] = t
    return doc


def join_configuration(spec: dict[str, Any], *, control_plane: bool, endpoint: dict[str, Any] | None,
                       token: str | None, ca_cert: bytes | None) -> dict[str, Any]:
    """The JoinConfiguration; discovery gets the token, the endpoint and the real CA's hash when unset."""
    jc = spec.get("joinConfiguration") or {}
    doc: dict[str, Any] = {"apiVersion": KUBEADM_API, "kind": "JoinConfiguration"}
    nr = _node_registration(jc.get("nodeRegistration"))
    if nr:
        doc["nodeRegistration"] = nr
    if jc.get("caCertPath"):
        doc["caCertPath"] = jc["caCertPath"]
    disc = jc.get("discovery") or {}
    d: dict[str, Any] = {}
    if contract.dig(disc, "file", "kubeConfigPath"):
        d["file"] = {"kubeConfigPath": disc["file"]["kubeConfigPath"]}
    else:
        bt = dict(disc.get("bootstrapToken") or {})
        out: dict[str, Any] = {"token": bt.get("token") or token or "",
                               "apiServerEndpoint": bt.get("apiServerEndpoint")
                               or (endpoint_string(endpoint) if endpoint else "")}
        hashes = list(bt.get("caCertHashes") or [])
        if not hashes and ca_cert:
            hashes = [certs_mod.ca_cert_hash(ca_cert)]
        if hashes:
            out["caCertHashes"] = hashes
        if bt.get("unsafeSkipCAVerification") or not hashes:
            out["unsafeSkipCAVerification"] = True
        d["bootstrapToken"] = out
    if disc.get("tlsBootstrapToken"):
        d["tlsBootstrapToken"] = disc["tlsBootstrapToken"]
    doc["discovery"] = d
    if control_plane:
        doc["controlPlane"] = _copy(jc.get("controlPlane") or {})
    for k in ("skipPhases", "patches"):
        if jc.get(k):
            doc[k] = _copy(jc[k])
    t = _timeouts(jc.get("timeouts"))
    if t:
        doc["timeouts"] = t
    return doc


def dump_documents(*docs: dict[str, Any]) -> str:
    return "".join("---\n" + yaml.safe_dump(d, sort_keys=False, default_flow_style=False) for d in docs)


# ================================================================================================
# cloud-config rendering
# ================================================================================================

def _quote(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False)


def _block(s: Any, indent: int) -> str:
    """A literal block scalar when that round-trips exactly, else a double-quoted scalar."""
    text = "" if s is None else str(s)
    lines = text.split("\n")
    body = lines[:-1] if text.endswith("\n") else lines
    safe = (text != "" and "\r" not in text and not text.startswith((" ", "\t", "\n"))
            and not text.endswith("\n\n") and all(ln == "" or ln.strip() for ln in body)
            and all(c == "\t" or c == "\n" or c.isprintable() for c in text))
    if not safe:
        return _quote(text)
    head = "|" if text.endswith("\n") else "|-"
    pad = " " * indent
    return head + "".join("\n" + (pad + ln if ln else "") for ln in body)


TEMPLATE_NAMES = ("_common.yaml.j2", "cloud-init-init.yaml.j2", "cloud-init-join.yaml.j2")


class CloudConfigTemplates:
    """The cloud-config templates (templates/bootstrap/*.j2) as text, compiled on first use. Whoever reads them
    from disk hands them over (controllers/services/bootstrap_templates.py); rendering here does no I/O."""

    def __init__(self, texts: Mapping[str, str]):
        missing = [n for n in TEMPLATE_NAMES if n not in texts]
        if missing:
            raise ValueError(f"bootstrap templates missing: {', '.join(missing)} (templates/bootstrap)")
        self.texts = dict(texts)
        env = jinja2.Environment(loader=jinja2.DictLoader(self.texts), undefined=jinja2.StrictUndefined,
                                 autoescape=False, keep_trailing_newline=True)
        env.filters["q"] = _quote
        env.filters["block"] = _block
        self.env = env


def _user(u: dict[str, Any]) -> dict[str, Any]:
    keys = {"name": "name", "gecos": "gecos", "groups": "groups", "homeDir": "homedir", "inactive": "inactive",
            "shell": "shell", "passwd": "passwd", "primaryGroup": "primary_group", "lockPassword": "lock_passwd",
            "sudo": "sudo", "sshAuthorizedKeys": "ssh_authorized_keys"}
    return {dst: u[src] for src, dst in keys.items() if u.get(src) not in (None, "", [])}


def _file(f: dict[str, Any]) -> dict[str, Any]:
    return {"path": f["path"], "owner": f.get("owner") or "", "permissions": f.get("permissions") or "",
            "encoding": f.get("encoding") or "", "append": bool(f.get("append")), "content": f.get("content") or ""}


def _verbosity(spec: dict[str, Any]) -> str:
    v = spec.get("verbosity")
    return f" --v {int(v)}" if v is not None else ""


def _sentinel() -> str:
    return f"mkdir -p {SENTINEL_PATH.rpartition('/')[0]} && echo success > {SENTINEL_PATH}"


def _ignore_flag() -> str:
    return "--ignore-preflight-errors=" + ",".join(IGNORE_PREFLIGHT_ERRORS)


def _render(templates: CloudConfigTemplates, template: str, spec: dict[str, Any], files: list[dict[str, Any]],
            kubeadm_command: str, users: list[dict[str, Any]] | None) -> str:
    tpl = templates.env.get_template(template)
    return tpl.render(
        files=[_file(f) for f in files],
        boot_commands=list(spec.get("bootCommands") or []),
        pre_commands=list(spec.get("preKubeadmCommands") or []),
        post_commands=list(spec.get("postKubeadmCommands") or []),
        kubeadm_command=kubeadm_command,
        users=[_user(u) for u in (users if users is not None else spec.get("users") or [])],
    )


def render_init(spec: dict[str, Any], cluster: dict[str, Any], version: str, certs: dict[str, certs_mod.KeyPair],
                files: list[dict[str, Any]] | None = None, users: list[dict[str, Any]] | None = None, *,
                templates: CloudConfigTemplates) -> str:
    """cloud-config for the first control-plane machine: CAs + kubeadm config + `kubeadm init`."""
    cdir = contract.dig(spec, "clusterConfiguration", "certificatesDir") or certs_mod.DEFAULT_CERTIFICATES_DIR
    kubeadm_yaml = dump_documents(cluster_configuration(spec, cluster, version), init_configuration(spec))
    all_files = [*certs_mod.cert_files(certs, cdir), *(files if files is not None else spec.get("files") or []),
                 {"path": INIT_CONFIG_PATH, "owner": "root:root", "permissions": "0640", "content": kubeadm_yaml}]
    cmd = f"kubeadm init --config {INIT_CONFIG_PATH} {_ignore_flag()}{_verbosity(spec)} && {_sentinel()}"
    return _render(templates, "cloud-init-init.yaml.j2", spec, all_files, cmd, users)


def render_join(spec: dict[str, Any], cluster: dict[str, Any], *, control_plane: bool, token: str | None,
                ca_cert: bytes, certs: dict[str, certs_mod.KeyPair] | None = None,
                files: list[dict[str, Any]] | None = None, users: list[dict[str, Any]] | None = None,
                templates: CloudConfigTemplates) -> str:
    """cloud-config for a joining machine; a control-plane join also carries the shared CAs/keys."""
    ep = contract.control_plane_endpoint(cluster)
    join = join_configuration(spec, control_plane=control_plane, endpoint=ep, token=token, ca_cert=ca_cert)
    cert_entries: list[dict[str, Any]] = []
    if control_plane:
        cdir = contract.dig(spec, "clusterConfiguration", "certificatesDir") or certs_mod.DEFAULT_CERTIFICATES_DIR
        cert_entries = list(certs_mod.cert_files(certs or {}, cdir))
    all_files = [*cert_entries, *(files if files is not None else spec.get("files") or []),
                 {"path": JOIN_CONFIG_PATH, "owner": "root:root", "permissions": "0640",
                  "content": dump_documents(join)}]
    cmd = f"kubeadm join --config {JOIN_CONFIG_PATH} {_ignore_flag()}{_verbosity(spec)} && {_sentinel()}"
    return _render(templates, "cloud-init-join.yaml.j2", spec, all_files, cmd, users)


