"""clusterctl's variable substitution (drone/envsubst syntax) for tests that load upstream's templates without
running clusterctl: `${VAR}`, `${ VAR }`, `${VAR:-default}`, `${VAR-default}`, `${VAR:=default}`, nested ones
innermost first so `${A:-${B}}` works."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from capd_py.api import kubeyaml

Obj = dict[str, Any]

_VAR = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:(:?[-=])([^${}]*))?\}")

# the values of upstream's test/e2e/config/docker.yaml (release-1.13); KUBERNETES_VERSION, CLUSTER_NAME and
# NAMESPACE are each test's own
E2E_VARIABLES = {
    "CONTROL_PLANE_MACHINE_COUNT": "1",
    "WORKER_MACHINE_COUNT": "1",
    "DOCKER_SERVICE_DOMAIN": "cluster.local",
    "IP_FAMILY": "dual",
    "DOCKER_SERVICE_CIDRS": "10.128.0.0/12",
    "DOCKER_POD_CIDRS": "192.168.0.0/16",
    "DOCKER_SERVICE_IPV6_CIDRS": "fd00:100:64::/108",
    "DOCKER_POD_IPV6_CIDRS": "fd00:100:96::/48",
    "DOCKER_PRELOAD_IMAGES": "[kindest/kindnetd:v20250214-acbabc1a]",
    # the e2e framework puts the CNI manifest in the ClusterResourceSet's ConfigMap data
    "CNI_RESOURCES": '{"resources": "apiVersion: v1\\nkind: List\\nitems: []\\n"}',
    "SERVER": "https://127.0.0.1:6443",
    "TOKEN": "abcdef.0123456789abcdef",
}


def substitute(text: str, values: dict[str, str], *, strict: bool = True) -> str:
    """`text` with its variables replaced. strict: a variable with neither a value nor a default is an error
    (clusterctl generate refuses it); otherwise it becomes empty (envsubst's own behaviour)."""
    missing: list[str] = []

    def one(m: re.Match[str]) -> str:
        name, op, default = m.group(1), m.group(2), m.group(3)
        value = values.get(name)
        if op and (value is None or (op.startswith(":") and value == "")):
            return default or ""
        if value is None:
            missing.append(name)
            return ""
        return value

    while True:
        new = _VAR.sub(one, text)
        if strict and missing:
            raise KeyError(f"no value for {sorted(set(missing))}")
        if new == text:
            return text
        text = new


def documents(path: Path, values: dict[str, str], namespace: str | None = None, *, strict: bool = True
              ) -> list[Obj]:
    """The objects of the template at `path` after substitution (each put in `namespace` when given)."""
    out: list[Obj] = []
    for d in kubeyaml.load_all(substitute(path.read_text(), values, strict=strict)):
        if isinstance(d, dict) and d.get("kind"):
            if namespace is not None:
                d.setdefault("metadata", {})["namespace"] = namespace
            out.append(d)
    return out
