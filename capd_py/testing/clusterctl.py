"""Upstream clusterctl for tests: the binary `make clusterctl` builds, and a local provider repository.

clusterctl finds provider releases in repositories (GitHub by default). A local repository is a directory
`{base}/{manifest label}/{version}/` holding the components YAML and a `metadata.yaml` (release series ->
contract); a `clusterctl.yaml` whose `providers:` name it with a `file://` URL replaces clusterctl's default
for that provider. `local_repository` writes one for capd-py's four providers at the version capd-py records
in the inventory (nothing to download: `clusterctl upgrade plan` runs offline) plus any extra provider (e.g. a
third-party infrastructure provider for `clusterctl init --infrastructure NAME`).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from capd_py.api.versions import CLUSTER_API_VERSION, parse
from capd_py.reconcile import inventory
from capd_py.testing.envtest import cache_dir

COMPONENTS_FILE = {inventory.CORE: "core-components.yaml", inventory.BOOTSTRAP: "bootstrap-components.yaml",
                   inventory.CONTROL_PLANE: "control-plane-components.yaml",
                   inventory.INFRASTRUCTURE: "infrastructure-components.yaml"}


def binary(version: str = CLUSTER_API_VERSION) -> Path:
    return cache_dir() / "clusterctl" / version / "clusterctl"


def missing(version: str = CLUSTER_API_VERSION) -> str | None:
    """Why the clusterctl binary cannot be used (None: it can)."""
    b = binary(version)
    if not (b.is_file() and os.access(b, os.X_OK)):
        return f"upstream clusterctl {version} not found at {b}; build it with `make clusterctl`"
    return None


@dataclass(frozen=True)
class ExtraProvider:
    name: str                # clusterctl provider name, e.g. "minimal"
    type: str                # inventory.INFRASTRUCTURE, ...
    version: str             # e.g. v0.1.0
    components: str          # the components YAML (may use clusterctl variables)
    contract: str = "v1beta2"

    @property
    def manifest_label(self) -> str:
        return inventory.ProviderRecord(self.name, self.type, "").manifest_label


def metadata_yaml(version: str, contract: str = "v1beta2") -> str:
    v = parse(version)
    return yaml.safe_dump({"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Metadata",
                           "releaseSeries": [{"major": v.major, "minor": v.minor, "contract": contract}]})


def local_repository(base: Path, extra: tuple[ExtraProvider, ...] = (),
                     version: str = CLUSTER_API_VERSION) -> Path:
    """Write the repository under `base`; returns the clusterctl.yaml naming it (pass it as `--config`).
    capd-py's own providers get an empty components file: they are never installed by clusterctl."""
    providers = []
    entries = [(p.provider_name, p.type, p.manifest_label, version, "", "v1beta2") for p in inventory.PROVIDERS]
    entries += [(e.name, e.type, e.manifest_label, e.version, e.components, e.contract) for e in extra]
    for name, typ, label, ver, components, contract in entries:
        d = base / label / ver
        d.mkdir(parents=True, exist_ok=True)
        (d / COMPONENTS_FILE[typ]).write_text(components)
        (d / "metadata.yaml").write_text(metadata_yaml(ver, contract))
        providers.append({"name": name, "type": typ, "url": (d / COMPONENTS_FILE[typ]).resolve().as_uri()})
    config = base / "clusterctl.yaml"
    config.write_text(yaml.safe_dump({"providers": providers}, sort_keys=False))
    return config


def run(args: list[str], config: Path | None, home: Path, timeout: float = 180,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """clusterctl with its own config directory under `home` (it writes ~/.config/cluster-api), no GitHub
    version check, no colours. `check`: a non-zero exit raises AssertionError with the output."""
    env = {**os.environ, "CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(home / "xdg"),
           "HOME": str(home), "NO_COLOR": "1"}
    cmd = [str(binary()), *args, *(["--config", str(config)] if config else [])]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r
