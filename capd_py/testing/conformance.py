"""`make conformance`: upstream Cluster API's own e2e suite (sigs.k8s.io/cluster-api/test/e2e, built by
hack/build-e2e-suite.sh) run against a capd-py management cluster (issue 41; docs/conformance.md).

What is upstream's and runs unchanged: the compiled ginkgo specs, their e2e framework, the flavors (rendered with
kustomize from the test module's data, as upstream's `generate-e2e-templates-main` does), upstream's
config/docker.yaml (variables, intervals). What is capd-py's, as upstream's docs tell a provider to supply: the
e2e config's providers (capd-py's clusterctl repository: its components, its metadata), the images named there,
the CNI file (capd-netd's manifest: kindnet's image cannot be pulled here), the Kubernetes versions (the node
images built here) and the management cluster (`-e2e.use-existing-cluster`, upstream's route for a custom one:
`capd-py init --for-clusterctl` + cert-manager built from source, then the suite's own `clusterctl init`).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from capd_py.api import features, kubeyaml
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube.components import write_repository
from capd_py.testing import release_mirror, test_extension_provider
from capd_py.testing.cert_manager import install_cert_manager
from capd_py.testing.envtest import cache_dir
from capd_py.testing.upstream import capd_netd_manifest

SUITE_VERSION = os.environ.get("CAPD_PY_CONFORMANCE_VERSION", "v1.14.2")
CONTROLLERS_IMAGE = "docker.io/capd-py/controllers:dev"
CERT_MANAGER_IMAGES = tuple(f"quay.io/jetstack/cert-manager-{c}:v1.21.1"
                            for c in ("cainjector", "webhook", "controller"))
# Kubernetes versions with node images here (`make images`): upstream's config names v1.36/v1.37, whose kindest/node
# images it pulls; the upgrade specs need FROM < TO
KUBERNETES_VERSION = "v1.35.4"
KUBERNETES_VERSION_UPGRADE_FROM = "v1.34.4"
# the etcd and CoreDNS images kubeadm v1.35 uses, preloaded in capd-py's node image (upstream names v1.37's)
ETCD_VERSION_UPGRADE_TO = "3.6.6-0"
COREDNS_VERSION_UPGRADE_TO = "v1.13.1"

# the capd-py provider that serves each of upstream's providers: (config name, type) -> repository label, file
PROVIDERS: Mapping[tuple[str, str], tuple[str, str]] = {
    ("cluster-api", "CoreProvider"): ("cluster-api", "core-components.yaml"),
    ("kubeadm", "BootstrapProvider"): ("bootstrap-kubeadm", "bootstrap-components.yaml"),
    ("kubeadm", "ControlPlaneProvider"): ("control-plane-kubeadm", "control-plane-components.yaml"),
    ("docker", "InfrastructureProvider"): ("infrastructure-docker", "infrastructure-components.yaml"),
    # upstream's test extension image -> capd-py's test extension, packaged the same way (test_extension_provider)
    (test_extension_provider.NAME, test_extension_provider.PROVIDER_TYPE): (
        test_extension_provider.LABEL, test_extension_provider.FILE_NAME),
}


def suite_dir(version: str = SUITE_VERSION) -> Path:
    return cache_dir() / "conformance" / version


def missing(version: str = SUITE_VERSION) -> str | None:
    """Why upstream's e2e suite cannot run here (None: it can)."""
    suite = suite_dir(version)
    for need in (suite / "bin" / "e2e.test", suite / "bin" / "kustomize", suite / "config" / "docker.yaml"):
        if not need.is_file():
            return f"upstream's e2e suite {version}: {need} is missing; build it with `make e2e-suite`"
    return None


# -- flavors ---------------------------------------------------------------------------------------------------

def flavor_builds(main: Path) -> dict[str, list[Path]]:
    """Upstream's `generate-e2e-templates-main`: each kustomization directory under data/infrastructure-docker/main
    becomes `<dir>.yaml`; cluster-template-kcp-adoption is its step1 and step2 joined (the plain files stay)."""
    builds: dict[str, list[Path]] = {}
    for d in sorted(p for p in main.iterdir() if p.is_dir() and p.name != "bases"):
        steps = sorted(s for s in d.iterdir() if s.is_dir() and (s / "kustomization.yaml").is_file())
        if (d / "kustomization.yaml").is_file():
            builds[f"{d.name}.yaml"] = [d]
        elif steps:
            builds[f"{d.name}.yaml"] = steps
    return builds


def render_flavors(kustomize: Path, main: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, dirs in flavor_builds(main).items():
        parts = [subprocess.run([str(kustomize), "build", str(d), "--load-restrictor", "LoadRestrictionsNone"],
                                check=True, capture_output=True, text=True).stdout for d in dirs]
        (target := out / name).write_text("---\n".join(parts))
        files.append(target)
    files += [out / p.name for p in sorted(main.glob("*.yaml"))]
    for p in sorted(main.glob("*.yaml")):
        (out / p.name).write_text(p.read_text())
    return files


# -- the e2e config --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Inputs:
    repository: Path            # capd-py's clusterctl repository (kube/components.write_repository)
    flavors: Sequence[Path]     # rendered upstream flavors
    cni: Path                   # the CNI manifest the framework injects as CNI_RESOURCES
    data: Path                  # the suite's data directory (kubetest, autoscaler files)
    version: str = CLUSTER_API_VERSION


def unsupported_gate_variables() -> dict[str, str]:
    """The EXP_* variables upstream's config turns on for features capd-py does not implement: capd-py refuses
    them at start (api/features.NOT_IMPLEMENTED), so they are set to false and the specs using them show it."""
    return {var: "false" for var, gate in features.INIT_VARIABLES.items() if gate in features.NOT_IMPLEMENTED}


def e2e_config(upstream: Mapping[str, Any], inputs: Inputs) -> dict[str, Any]:
    """upstream's config/docker.yaml with capd-py's providers, images, CNI and Kubernetes versions; its intervals
    and the rest of its variables unchanged. The providers' older releases (v1.11-v1.13 URLs on GitHub, for the
    clusterctl-upgrade specs) are left out: their components and images cannot be fetched here, and the suite
    downloads every listed version before the first spec (docs/conformance.md says what that leaves not run)."""
    providers: list[dict[str, Any]] = []
    for p in upstream["providers"]:
        served = PROVIDERS.get((p["name"], p["type"]))
        if served is None:
            continue
        label, file_name = served
        base = inputs.repository / label / inputs.version
        files = [{"sourcePath": str(base / "metadata.yaml")}]
        if p["type"] == "InfrastructureProvider":
            files = [{"sourcePath": str(f)} for f in inputs.flavors] + files
        providers.append({"name": p["name"], "type": p["type"], "versions": [
            {"name": inputs.version, "value": str(base / file_name), "type": "url", "contract": "v1beta2",
             "files": files}]})
    variables = dict(upstream["variables"])
    variables.update({
        "KUBERNETES_VERSION_MANAGEMENT": KUBERNETES_VERSION,
        "KUBERNETES_VERSION": KUBERNETES_VERSION,
        "KUBERNETES_VERSION_UPGRADE_FROM": KUBERNETES_VERSION_UPGRADE_FROM,
        "KUBERNETES_VERSION_UPGRADE_TO": KUBERNETES_VERSION,
        "ETCD_VERSION_UPGRADE_TO": ETCD_VERSION_UPGRADE_TO,
        "COREDNS_VERSION_UPGRADE_TO": COREDNS_VERSION_UPGRADE_TO,
        "DOCKER_PRELOAD_IMAGES": "[]",
        "CNI": str(inputs.cni),
        "KUBETEST_CONFIGURATION": str(inputs.data / "kubetest" / "conformance.yaml"),
        "AUTOSCALER_WORKLOAD": str(inputs.data / "autoscaler" / "autoscaler-to-workload-workload.yaml"),
        **unsupported_gate_variables(),
    })
    images = [{"name": CONTROLLERS_IMAGE, "loadBehavior": "mustLoad"}]
    images += [{"name": i, "loadBehavior": "tryLoad"} for i in CERT_MANAGER_IMAGES]
    return {"images": images, "providers": providers, "variables": variables,
            "intervals": dict(upstream["intervals"])}


# -- the report --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SpecResult:
    name: str
    state: str            # passed | failed | not run
    seconds: float
    failure: str = ""     # the first failed assertion, its location


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def results_of(junit: Path) -> list[SpecResult]:
    """The specs of a ginkgo JUnit report (setup nodes left out: their failure shows on every spec)."""
    out: list[SpecResult] = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = _ANSI.sub("", case.get("name", ""))
        if name.startswith("[Synchronized") or name.startswith("[BeforeSuite") or name.startswith("[AfterSuite"):
            continue
        name = re.sub(r"^\[It\]\s*", "", name)
        seconds = float(case.get("time", "0") or 0)
        failed = case.find("failure")
        if failed is None:
            failed = case.find("error")
        if failed is not None:
            text = _ANSI.sub("", (failed.get("message") or "") + "\n" + (failed.text or "")).strip()
            out.append(SpecResult(name, "failed", seconds, first_failure(text)))
        elif case.find("skipped") is not None:
            out.append(SpecResult(name, "not run", seconds))
        else:
            out.append(SpecResult(name, "passed", seconds))
    return out


def first_failure(text: str, limit: int = 400) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit] + " …"


def table(results: Sequence[SpecResult]) -> str:
    rows = ["| upstream spec | result | time | first failure |", "|---|---|---|---|"]
    for r in sorted(results, key=lambda r: r.name):
        spent = f"{r.seconds:.0f} s" if r.state != "not run" else ""
        rows.append(f"| {r.name.replace('|', '/')} | {r.state} | {spent} | {r.failure.replace('|', '/')} |")
    passed = sum(r.state == "passed" for r in results)
    return "\n".join(rows) + f"\n\n{passed} of {len(results)} upstream specs pass.\n"


# -- the run -----------------------------------------------------------------------------------------------------

def _step(message: str) -> None:
    print(f" • {message}", file=sys.stderr, flush=True)


def prepare(work: Path, suite: Path) -> Path:
    """Write the repository, flavors, CNI file and e2e config under `work`; the config's path."""
    repository = work / "repository"
    write_repository(repository, image=CONTROLLERS_IMAGE)
    test_extension_provider.write(repository, CLUSTER_API_VERSION, CONTROLLERS_IMAGE)
    flavors = render_flavors(suite / "bin" / "kustomize", suite / "data" / "infrastructure-docker" / "main",
                             work / "flavors")
    cni = work / "cni" / "capd-netd.yaml"
    cni.parent.mkdir(parents=True, exist_ok=True)
    cni.write_text(capd_netd_manifest())
    upstream = kubeyaml.load((suite / "config" / "docker.yaml").read_text())
    config = e2e_config(upstream, Inputs(repository=repository, flavors=flavors, cni=cni, data=suite / "data"))
    (path := work / "e2e-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def mirror_assets(work: Path, suite: Path) -> Path:
    assets = work / "release-mirror"
    shared = suite / "data" / "shared"
    by_minor = {m.name.lstrip("v"): m / "metadata.yaml" for m in shared.iterdir() if m.name.startswith("v1.")}
    main_minor = ".".join(SUITE_VERSION.lstrip("v").split(".")[:2])
    by_minor[main_minor] = shared / "main" / "metadata.yaml"
    release_mirror.stage_metadata(assets, release_mirror.UPSTREAM_RELEASES[release_mirror.CLUSTER_API_MODULE],
                                  by_minor)
    return assets


def run_suite(suite: Path, config: Path, artifacts: Path, kubeconfig: Path, focus: str, skip: str,
              timeout: str, dry_run: bool = False) -> tuple[int, Path]:
    """Run e2e.test against the management cluster in `kubeconfig`; (exit code, JUnit report)."""
    junit = artifacts / "junit.e2e.xml"
    args = [str(suite / "bin" / "e2e.test"), f"-e2e.config={config}", f"-e2e.artifacts-folder={artifacts}",
            "-e2e.use-existing-cluster=true", f"-ginkgo.junit-report={junit}", "-ginkgo.v",
            f"-ginkgo.timeout={timeout}", "-ginkgo.no-color"]
    if focus:
        args.append(f"-ginkgo.focus={focus}")
    if skip:
        args.append(f"-ginkgo.skip={skip}")
    if dry_run:
        args.append("-ginkgo.dry-run")
    artifacts.mkdir(parents=True, exist_ok=True)
    with release_mirror.serving(mirror_assets(artifacts.parent, suite)) as mirror:
        env = mirror.client_environment()
        env["KUBECONFIG"] = str(kubeconfig)
        env.pop("ARTIFACTS", None)  # the suite would write there instead of -e2e.artifacts-folder
        with (artifacts / "e2e.log").open("w") as log:
            code = subprocess.run(args, env=env, cwd=suite / "data", stdout=log, stderr=subprocess.STDOUT).returncode
    return code, junit


MANAGEMENT_NAME = "capd-conformance"


def _capd_py(*args: str, timeout: float = 900) -> str:
    exe = Path(sys.executable).with_name("capd-py")
    return subprocess.run([str(exe), *args], check=True, stdout=subprocess.PIPE, text=True, timeout=timeout).stdout


def create_management(name: str = MANAGEMENT_NAME) -> Path:
    """A capd-py management cluster ready for the suite's `clusterctl init`: `capd-py init --for-clusterctl`
    (node, CNI, docker socket, controllers image) and cert-manager, whose API clusterctl requires."""
    kubeconfig = Path(_capd_py("init", "--for-clusterctl", "--name", name).strip().splitlines()[-1])
    _step("installing cert-manager (clusterctl init requires its API; built from source, hack/build-cert-manager.sh)")
    install_cert_manager(kubeconfig, [f"{name}-control-plane"])
    return kubeconfig


def delete_management(kubeconfig: Path, name: str = MANAGEMENT_NAME) -> None:
    """Delete what a failed spec left (its Clusters, through the controllers, so their containers go too), then the
    management cluster."""
    kubectl = cache_dir() / "k8s" / KUBERNETES_VERSION / "bin" / "kubectl"
    subprocess.run([str(kubectl) if kubectl.exists() else "kubectl", "--kubeconfig", str(kubeconfig), "delete",
                    "clusters.cluster.x-k8s.io", "--all", "-A", "--wait", "--timeout=10m"], check=False)
    _capd_py("delete", "management", "--name", name)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m capd_py.testing.conformance", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, default=None, help="an existing management cluster (capd-py "
                        "init --for-clusterctl + cert-manager); default: create one and delete it afterwards")
    parser.add_argument("--keep", action="store_true", help="keep the management cluster this run created")
    parser.add_argument("--work", type=Path, default=None, help="work directory (default: a new one in the cache)")
    parser.add_argument("--focus", default=os.environ.get("CONFORMANCE_FOCUS", ""))
    parser.add_argument("--skip", default=os.environ.get("CONFORMANCE_SKIP", ""))
    parser.add_argument("--timeout", default=os.environ.get("CONFORMANCE_TIMEOUT", "6h"))
    parser.add_argument("--report", type=Path, default=None, help="also write the table to this file")
    parser.add_argument("--dry-run", action="store_true")
    ns = parser.parse_args(argv)
    suite = suite_dir()
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    work = ns.work or suite / "runs" / stamp
    work.mkdir(parents=True, exist_ok=True)
    _step(f"writing the e2e config, capd-py's repository and upstream's flavors into {work}")
    config = prepare(work, suite)
    kubeconfig = ns.kubeconfig
    created = kubeconfig is None and not ns.dry_run
    if created:
        _step(f"creating the management cluster {MANAGEMENT_NAME!r}")
        kubeconfig = create_management()
    try:
        _step(f"running upstream's e2e suite {SUITE_VERSION} (focus {ns.focus!r}, skip {ns.skip!r}); log: "
              f"{work / 'artifacts' / 'e2e.log'}")
        code, junit = run_suite(suite, config, work / "artifacts", kubeconfig or Path("/dev/null"), ns.focus,
                                ns.skip, ns.timeout, ns.dry_run)
    finally:
        if created and not ns.keep and kubeconfig is not None:
            _step(f"deleting the management cluster {MANAGEMENT_NAME!r}")
            delete_management(kubeconfig)
    if junit.is_file():
        results = results_of(junit)
        if ns.dry_run:  # ginkgo reports every spec of a dry run as passed: none ran
            results = [SpecResult(r.name, "not run", 0.0) for r in results]
        text = table(results)
        print(text)
        if ns.report:
            ns.report.write_text(text)
    print(f"exit {code}; artifacts in {work / 'artifacts'}", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
