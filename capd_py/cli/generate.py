"""Cluster templates with clusterctl-style variables.

`${VAR}` must be given; `${VAR:=default}` (or `${VAR:-default}`) falls back to the default when VAR is
unset or empty. `$${VAR}` is a literal `${VAR}`. Values come from explicit settings first, then the
environment (as clusterctl does), then the template's default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from capd_py.api import kubeyaml
from capd_py.api.admission import checks

DEFAULT_KUBERNETES_VERSION = "v1.34.4"

# `$${...}` escapes; otherwise ${NAME}, ${NAME:=default}, ${NAME:-default}, ${NAME=default}, ${NAME-default}.
_VAR = re.compile(r"\$(\$)?\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[=-])([^}]*))?\}")
_K8S_VERSION = re.compile(r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")
_CIDR = re.compile(r"^[0-9a-fA-F:.]+/\d{1,3}$")


class TemplateError(Exception):
    """The template or a value given for it is wrong; the message says which and how to fix it."""


class TemplateValueError(TemplateError):
    """A value given for a variable is malformed (a usage error on the command line)."""


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None  # None: required

    @property
    def required(self) -> bool:
        return self.default is None


DEFAULT_TEMPLATE = "cluster-template.yaml"


def templates_dir() -> Path:
    """templates/ of the source tree, else the installed data-files copy (<prefix>/share/capd-py/templates)."""
    src = Path(__file__).resolve().parents[2] / "templates"
    if (src / DEFAULT_TEMPLATE).exists():
        return src
    import sys

    return Path(sys.prefix) / "share" / "capd-py" / "templates"


def default_template_path() -> Path:
    return templates_dir() / DEFAULT_TEMPLATE


def flavors() -> list[str]:
    """The flavors next to the default template: cluster-template-<flavor>.yaml, as clusterctl names them."""
    return sorted(p.name.removeprefix("cluster-template-").removesuffix(".yaml")
                  for p in templates_dir().glob("cluster-template-*.yaml"))


def flavor_template_path(flavor: str | None) -> Path:
    """The template of a flavor (clusterctl: `--flavor NAME` selects cluster-template-NAME.yaml); None or ""
    is the default template. An unknown flavor is a usage error listing the available ones."""
    if not flavor:
        return default_template_path()
    known = flavors()
    if flavor not in known:
        raise TemplateValueError(f"unknown flavor {flavor!r}: available flavors are "
                                 + (", ".join(known) if known else "none")
                                 + " (or none for the default template)")
    return templates_dir() / f"cluster-template-{flavor}.yaml"


def read_template(path: str | Path | None = None) -> str:
    p = Path(path) if path else default_template_path()
    try:
        return p.read_text()
    except OSError as e:
        raise TemplateError(f"cannot read template {p}: {e.strerror or e}") from None


def variables(text: str) -> list[Variable]:
    """Variables in order of first use; a variable is required unless some use gives it a default."""
    seen: dict[str, str | None] = {}
    for m in _VAR.finditer(text):
        if m.group(1):
            continue
        name, op, default = m.group(2), m.group(3), m.group(4)
        d = (default or "") if op else None
        if name not in seen or (seen[name] is None and d is not None):
            seen[name] = d
    return [Variable(n, d) for n, d in seen.items()]


def expand(text: str, values: Mapping[str, str]) -> str:
    """Substitute every variable; raise TemplateError naming all required variables left unset."""
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return m.group(0)[1:]
        name, op, default = m.group(2), m.group(3), m.group(4)
        v = values.get(name)
        if op:
            empty_counts = op.startswith(":")
            if v is None or (empty_counts and v == ""):
                return default or ""
            return v
        if v is None:
            if name not in missing:
                missing.append(name)
            return ""
        return v

    out = _VAR.sub(sub, text)
    if missing:
        raise TemplateError(
            "missing value for template variable(s): " + ", ".join(missing)
            + " (set them as environment variables or with the matching command-line flags)")
    return out


def parse_documents(text: str) -> list[dict[str, Any]]:
    """Multi-document YAML into a list of objects; empty documents are skipped."""
    try:
        docs = list(kubeyaml.load_all(text))
    except yaml.YAMLError as e:
        raise TemplateError(f"invalid YAML: {e}") from None
    out: list[dict[str, Any]] = []
    for i, d in enumerate(docs):
        if d is None:
            continue
        if not isinstance(d, dict):
            raise TemplateError(f"document {i + 1} is not a mapping but a {type(d).__name__}")
        out.append(d)
    return out


def validate_values(values: Mapping[str, str]) -> None:
    """Catch the mistakes the API server would report late or confusingly."""
    errs: list[str] = []
    name = values.get("CLUSTER_NAME")
    if name is not None and (not checks.is_dns1123_label(name) or len(name) > 40):
        errs.append(f"cluster name {name!r} must be a lowercase DNS label (a-z, 0-9, '-') of at most 40 characters")
    ns = values.get("NAMESPACE")
    if ns and not checks.is_dns1123_label(ns):
        errs.append(f"namespace {ns!r} must be a lowercase DNS label")
    v = values.get("KUBERNETES_VERSION")
    if v and not _K8S_VERSION.match(v):
        errs.append(f"Kubernetes version {v!r} must look like v1.34.4")
    for key in ("CONTROL_PLANE_MACHINE_COUNT", "WORKER_MACHINE_COUNT"):
        c = values.get(key)
        if c is not None and c != "" and (not c.isdigit() or int(c) < 0):
            errs.append(f"{key} must be a non-negative integer, not {c!r}")
    cp = values.get("CONTROL_PLANE_MACHINE_COUNT")
    if cp and cp.isdigit() and int(cp) < 1:
        errs.append("CONTROL_PLANE_MACHINE_COUNT must be at least 1")
    for key in ("POD_CIDR", "SERVICE_CIDR"):
        c = values.get(key)
        if c and not _CIDR.match(c):
            errs.append(f"{key} {c!r} is not a CIDR like 10.244.0.0/16")
    if errs:
        raise TemplateValueError("; ".join(errs))


def generate_cluster(
    name: str,
    *,
    namespace: str | None = None,
    kubernetes_version: str | None = None,
    control_plane_machine_count: int | None = None,
    worker_machine_count: int | None = None,
    pod_cidr: str | None = None,
    service_cidr: str | None = None,
    template: str | Path | None = None,
    flavor: str | None = None,
    env: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """Render a cluster template to YAML text that `kubectl apply -f -` / `capd-py apply` take as is.
    `template` is a file of your own, `flavor` one of capd-py's (cluster-template-<flavor>.yaml); not both."""
    if template and flavor:
        raise TemplateValueError("give either a template file (--from) or a flavor (--flavor), not both")
    text = read_template(template or flavor_template_path(flavor))
    known = {v.name for v in variables(text)}
    environ = os.environ if env is None else env
    values: dict[str, str] = {k: environ[k] for k in known if k in environ}
    flags: dict[str, Any] = {
        "CLUSTER_NAME": name, "NAMESPACE": namespace, "KUBERNETES_VERSION": kubernetes_version,
        "CONTROL_PLANE_MACHINE_COUNT": control_plane_machine_count,
        "WORKER_MACHINE_COUNT": worker_machine_count, "POD_CIDR": pod_cidr, "SERVICE_CIDR": service_cidr,
    }
    values.update({k: str(v) for k, v in flags.items() if v is not None})
    values.update(extra or {})
    validate_values(values)
    out = expand(text, values)
    parse_documents(out)  # a template that renders to broken YAML is our bug or the --from file's: say so now
    return out


# variables the command line sets itself (clusterctl: the first argument, the target namespace)
FLAG_VARIABLES = {"CLUSTER_NAME": "the cluster name argument", "NAMESPACE": "--target-namespace",
                  "KUBERNETES_VERSION": "--kubernetes-version",
                  "CONTROL_PLANE_MACHINE_COUNT": "--control-plane-machine-count",
                  "WORKER_MACHINE_COUNT": "--worker-machine-count", "POD_CIDR": "--pod-cidr",
                  "SERVICE_CIDR": "--service-cidr"}


def list_variables(template: str | Path | None = None, flavor: str | None = None) -> str:
    """`generate cluster --list-variables`: the template's variables as clusterctl lists them — required ones
    (no default; set them in the environment), then optional ones with their default or the flag setting them."""
    if template and flavor:
        raise TemplateValueError("give either a template file (--from) or a flavor (--flavor), not both")
    vs = variables(read_template(template or flavor_template_path(flavor)))
    required = [v for v in vs if v.required and v.name not in FLAG_VARIABLES]
    optional = [v for v in vs if not v.required or v.name in FLAG_VARIABLES]
    width = max((len(v.name) for v in vs), default=0) + 2
    out = []
    if required:
        out += ["Required Variables:", *(f"  - {v.name}" for v in sorted(required, key=lambda v: v.name)), ""]
    if optional:
        out.append("Optional Variables:")
        for v in sorted(optional, key=lambda v: v.name):
            how = f"set by {FLAG_VARIABLES[v.name]}" if v.name in FLAG_VARIABLES else f'defaults to "{v.default}"'
            if v.name in FLAG_VARIABLES and v.default is not None:
                how += f', defaults to "{v.default}"'
            out.append(f"  - {v.name.ljust(width)}({how})")
        out.append("")
    return "\n".join(out)

