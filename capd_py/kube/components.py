"""The controllers manifest and capd-py's clusterctl repository (reads the packaged manifests, writes files; what
goes where is decided in reconcile/components.py; docs/clusterctl.md "Installing capd-py with clusterctl").

`manifests/controllers.yaml` is the one description of the in-cluster controllers: `capd-py init --in-cluster`
applies it with its placeholders filled from the host (cli/management.py), the infrastructure provider's components
carry it with clusterctl variables in their place (in capd-system, one replica: reconcile/components.py)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from capd_py.api import kubeyaml
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube import admission_webhook
from capd_py.kube import conversion_webhook as cw
from capd_py.reconcile import components, imageload, servingcert, subnets

MANIFESTS = Path(__file__).resolve().parent / "manifests"
CONTROLLERS_MANIFEST = MANIFESTS / "controllers.yaml"
DEFAULT_IMAGE = "capd-py/controllers:dev"


def controllers_manifest(image: str, privileged: str, network: str, pool: str, gates: str,
                         docker_network: str = '""') -> str:
    """controllers.yaml with its placeholders filled (plain values, or clusterctl variables; `docker_network` is
    YAML: a quoted string or the variable)."""
    return (CONTROLLERS_MANIFEST.read_text().replace("@IMAGE@", image).replace("@PRIVILEGED_MODE@", privileged)
            .replace("@NETWORK_POOL@", pool).replace("@NETWORK@", network).replace("@FEATURE_GATES@", gates)
            .replace("@DOCKER_NETWORK@", docker_network))


def webhook_service() -> dict[str, Any]:
    return {"namespace": servingcert.SECRET_NAMESPACE, "name": servingcert.SERVICE_NAME,
            "port": servingcert.SERVICE_PORT}


def release(image: str = DEFAULT_IMAGE) -> list[components.ProviderComponents]:
    """capd-py's four providers' components: the controllers manifest with clusterctl variables, the CRDs serving
    v1beta1 through the webhook Service, the admission webhook configurations (no caBundle: the controllers
    write theirs). The image as containerd names it (`docker.io/capd-py/controllers:dev`): clusterctl refuses
    references that are not canonical ("repository name must be canonical") before it applies image overrides."""
    pool = ",".join(str(p) for p in subnets.parse_pool(subnets.DEFAULT_POOL))
    v = components.VARIABLES
    text = controllers_manifest(imageload.normalize(image), v["@PRIVILEGED_MODE@"], v["@NETWORK@"],
                                components.network_pool_variable(pool), components.feature_gates_variables(),
                                v["@DOCKER_NETWORK@"])
    controllers = [d for d in kubeyaml.load_all(text) if d]
    crds, admission = _served()
    return components.split(crds, controllers, admission)


@functools.cache
def _served() -> tuple[tuple[dict[str, Any], ...], tuple[dict[str, Any], ...]]:
    """The CRDs serving v1beta1 through the webhook Service, the admission webhook configurations (read and
    converted once per process: about a second; components.split copies what it keeps)."""
    crds = cw.crds_serving_v1beta1(cw.webhook_conversion(b"", service=webhook_service()))
    return tuple(crds), tuple(admission_webhook.configurations(b"", service=webhook_service()))


def dump(docs: Sequence[dict[str, Any]]) -> str:
    # no line folding: clusterctl substitutes `${VAR:=default}` in the text before it parses the YAML; libyaml's
    # emitter when there is one (a megabyte of CRDs: 0.3 s instead of 3 s)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump_all(list(docs), Dumper=dumper, sort_keys=False, width=1 << 30)


def write_provider(base: Path, label: str, version: str, file_name: str, text: str,
                   contract: str = components.CONTRACT) -> Path:
    """`{base}/{label}/{version}/{file_name}` + its metadata.yaml; returns the components file."""
    d = base / label / version
    d.mkdir(parents=True, exist_ok=True)
    (d / file_name).write_text(text)
    meta = components.metadata(version)
    meta["releaseSeries"][0]["contract"] = contract
    (d / components.METADATA_FILE).write_text(yaml.safe_dump(meta, sort_keys=False))
    return d / file_name


def write_repository(base: Path, version: str = CLUSTER_API_VERSION, image: str = DEFAULT_IMAGE,
                     extra: Sequence[dict[str, Any]] = ()) -> Path:
    """The repository under `base` (made absolute) and its clusterctl.yaml; returns the clusterctl.yaml.
    `extra`: more `providers:` entries for the config (their files written by the caller)."""
    base = base.expanduser().resolve()
    for p in release(image):
        write_provider(base, p.provider.manifest_label, version, p.file_name, dump(p.documents))
    config = base / components.CONFIG_FILE
    config.write_text(yaml.safe_dump(components.clusterctl_config(base.as_posix(), version, extra), sort_keys=False))
    return config
