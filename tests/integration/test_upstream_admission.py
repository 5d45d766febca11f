"""Upstream Cluster API's own Docker templates are admitted by capd-py's CRDs.

The manifests are upstream release-1.13's, vendored in tests/fixtures/upstream/ by
hack/render-upstream-templates.sh (every e2e flavor under test/e2e/data/infrastructure-docker/main/ rendered
with kustomize as upstream's Makefile does, plus test/infrastructure/docker/templates/). Their clusterctl
variables are substituted here with the values upstream's docker e2e config uses, for Kubernetes versions
across the range upstream v1.13 supports. Every object of a kind capd-py serves must pass a server-side
dry-run create (strict field validation: nothing unknown, nothing pruned) and a dry-run server-side apply.
Kinds capd-py does not serve yet are listed in EXPECTED_NOT_SERVED; once a kind is served its objects are
checked automatically and the list must lose it (test_expected_not_served_is_current).

The API server here is set up as `capd-py init` sets one up: the CRDs serve v1beta1 too (upstream's runtime-SDK
flavors are v1beta1), converted by the webhook, which runs in a process of its own for this module.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import gvk, versions
from capd_py.kube.client import FIELD_MANAGER, Kube, KubeError
from capd_py.kube.conversion_webhook import crds_serving_v1beta1, webhook_conversion
from capd_py.kube.crds import load_crds
from capd_py.reconcile.servingcert import host_mode_url, new_serving_cert, new_webhook_ca
from capd_py.testing.conversion import WEBHOOK_PROCESS
from capd_py.testing.envtest import EnvTest, free_port, started_with_crds

pytestmark = pytest.mark.integration

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
FILES = sorted(p.name for p in UPSTREAM.glob("*.yaml"))
Obj = dict[str, Any]

# (apiVersion, kind) in upstream's templates that capd-py does not serve (yet): the dev provider's templates. The
# v1beta1 objects (upstream's runtime-SDK flavors) are served through the conversion webhook.
EXPECTED_NOT_SERVED: set[tuple[str, str]] = {
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DevClusterTemplate"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DevMachineTemplate"),
}


@pytest.fixture(scope="module")
def envtest() -> Iterator[EnvTest]:
    """This module's API server (replaces the shared one for `kube` and `namespace`): CRDs as `capd-py init`
    installs them, serving v1beta1 through the webhook, which runs for the whole module."""
    port = free_port()
    ca = new_webhook_ca()
    pair = new_serving_cert(ca, ["127.0.0.1"])
    env = {**os.environ, "CERT": pair.cert.decode(), "KEY": pair.key.decode()}
    proc = subprocess.Popen([sys.executable, "-c", WEBHOOK_PROCESS, str(port)], env=env, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        conversion = webhook_conversion(ca.cert, url=host_mode_url("127.0.0.1", port))
        with started_with_crds(crds_serving_v1beta1(conversion)) as started:
            yield started
    finally:
        proc.kill()
        proc.wait()


# the values of upstream's test/e2e/config/docker.yaml (release-1.13), KUBERNETES_VERSION set per run
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
# upstream v1.13's oldest supported workload version, capd-py's default, upstream release-1.13's e2e version
KUBERNETES_VERSIONS = [versions.MIN_SUPPORTED, versions.DEFAULT_VERSION, "v1.36.3", "v1.37.0-rc.1"]

# clusterctl (drone/envsubst) syntax, innermost first so `${A:-${B}}` works: ${VAR}, ${ VAR }, ${VAR:-d}, ...
_VAR = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:(:?[-=])([^${}]*))?\}")


def substitute(text: str, values: dict[str, str]) -> str:
    missing: list[str] = []

    def one(m: re.Match[str]) -> str:
        name, op, default = m.group(1), m.group(2), m.group(3)
        v = values.get(name)
        if op and (v is None or (op.startswith(":") and v == "")):
            return default or ""
        if v is None:
            missing.append(name)
            return ""
        return v

    while True:
        new = _VAR.sub(one, text)
        assert not missing, f"no value for {missing}"
        if new == text:
            return text
        text = new


def served() -> dict[tuple[str, str], gvk.GVK]:
    """(apiVersion, kind) -> GVK for every CRD version capd-py installs, plus the core kinds templates carry."""
    out = {(gvk.CONFIG_MAP.api_version, gvk.CONFIG_MAP.kind): gvk.CONFIG_MAP,
           (gvk.SECRET.api_version, gvk.SECRET.kind): gvk.SECRET}
    for c in crds_serving_v1beta1(webhook_conversion(b"", url="https://127.0.0.1/convert")):
        s = c["spec"]
        for v in s["versions"]:
            if v.get("served"):
                g = gvk.GVK(s["group"], v["name"], s["names"]["kind"], s["names"]["plural"])
                out[(g.api_version, g.kind)] = g
    return out


def documents(name: str, namespace: str, version: str) -> list[Obj]:
    values = {**E2E_VARIABLES, "NAMESPACE": namespace, "CLUSTER_NAME": "up-" + name.removesuffix(".yaml")[-20:],
              "KUBERNETES_VERSION": version}
    text = substitute((UPSTREAM / name).read_text(), values)
    out = []
    for d in yaml.safe_load_all(text):
        if d:
            d = copy.deepcopy(d)
            d["metadata"]["namespace"] = namespace
            out.append(d)
    return out


def test_every_fixture_names_its_upstream_source() -> None:
    assert len(FILES) >= 20 and "e2e-cluster-template.yaml" in FILES
    for n in FILES:
        head = (UPSTREAM / n).read_text().splitlines()[:3]
        assert head[0].startswith("# Upstream Cluster API release-1.13 (") and "render-upstream-templates" in head[2], n


def test_substitution_follows_clusterctl() -> None:
    v = {"A": "a", "E": ""}
    assert substitute("${A} ${B:-x} ${E:-y} ${E-z} ${B:=[1]} ${C:-${A}} ${ A }", v) == "a x y  [1] a a"
    with pytest.raises(AssertionError, match="no value"):
        substitute("${MISSING}", v)


def test_expected_not_served_is_current() -> None:
    """A kind capd-py starts serving is checked by the admission test below: drop it from the list."""
    now_served = sorted(EXPECTED_NOT_SERVED & served().keys())
    assert not now_served, f"capd-py serves {now_served} now: remove them from EXPECTED_NOT_SERVED"
    seen = {(d["apiVersion"], d["kind"]) for n in FILES for d in documents(n, "ns", versions.DEFAULT_VERSION)}
    assert seen >= EXPECTED_NOT_SERVED, f"not in upstream's templates: {EXPECTED_NOT_SERVED - seen}"
    # the templates exercise every kind upstream's Docker flavors use that capd-py serves
    kinds = {k for _, k in seen & served().keys()}
    assert kinds >= {"Cluster", "ClusterClass", "Machine", "MachineDeployment", "MachineHealthCheck", "KubeadmConfig",
                     "KubeadmConfigTemplate", "KubeadmControlPlane", "KubeadmControlPlaneTemplate",
                     "DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate"}, kinds


async def _admit(kube: Kube, g: gvk.GVK, obj: Obj) -> list[str]:
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    errors = []
    try:
        await kube.acall("POST", g.path(ns), body=obj, query=[("dryRun", "All"), ("fieldValidation", "Strict")])
    except KubeError as e:
        errors.append(f"create: {e.status} {e.message}")
    try:
        await kube.acall("PATCH", g.path(ns, name), body=obj, content_type="application/apply-patch+yaml",
                         query=[("dryRun", "All"), ("fieldManager", FIELD_MANAGER), ("force", "true"),
                                ("fieldValidation", "Strict")])
    except KubeError as e:
        errors.append(f"server-side apply: {e.status} {e.message}")
    return errors


# Every way a capd-py CRD is stricter than upstream's release-1.13 CRD for the same kind (hack/compare_upstream_crds.py
# against the schemas vendored in tests/fixtures/upstream/crds/), each with why: an upstream webhook check the CRD
# expresses, or a deliberate capd-py rule (docs/DEVELOPING.md "Upstream parity"). A new difference fails
# test_no_unexplained_strictness, an entry nothing matches any more fails it too (the list only shrinks).
STRICTER_THAN_UPSTREAM_CRDS: list[tuple[str, str]] = [
    (".metadata.labels{*}: maxLength 63", "upstream webhooks: ObjectMeta.Validate (label values)"),
    (".matchLabels{*}: maxLength 63", "upstream webhooks: metav1.LabelSelectorAsSelector"),
    (".matchExpressions[].operator: enum", "upstream webhooks: metav1.LabelSelectorAsSelector"),
    (".matchLabels: maxProperties 64", "deliberate: bounds the CEL cost of the selector-matches-labels rule"),
    ("CEL 'clusterName is immutable'",
     "upstream Machine/MachineSet/MachineDeployment/MachinePool/MHC/binding webhooks"),
    ("CEL 'spec.template.spec.clusterName must match spec.clusterName'",
     "upstream MachineSet/Deployment/MachinePool webhooks"),
    ("CEL 'taints feature for MachinePools is not yet implemented'", "upstream MachinePool webhook"),
    ("CEL 'spec.template.metadata.labels must match spec.selector.matchLabels'",
     "upstream MachineSet/Deployment webhooks (selector must match the template labels)"),
    ("CEL 'expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef",
     "upstream Machine/MachineSet/Deployment webhooks"),
    ("CEL 'must be a valid semantic version", "upstream webhooks (KubeSemver); deliberate: strict semver 2.0"),
    ("CEL 'Kubernetes version is not supported", "deliberate: the supported range (capd_py/api/versions.py)"),
    ("CEL 'cannot update Kubernetes version by more than one minor version",
     "upstream KubeadmControlPlane webhook (validateVersion: no update to from.minor + 2 or later)"),
    ("must be either a non-negative int or a percentage",
     "upstream webhooks (intstr.GetScaledValueFromIntOrPercent); deliberate: not negative"),
    ("CEL 'replicas must be greater than or equal to 0'", "deliberate: as the scale subresource"),
    ("CEL 'replicas must be greater than or equal to 1", "upstream KubeadmControlPlane webhook"),
    ("CEL 'nodeStartupTimeoutSeconds must be 0 or at least 30 seconds'", "upstream MachineHealthCheck webhook"),
    ("CEL 'kubeadmConfigSpec.clusterConfiguration.", "upstream KubeadmControlPlane webhook (allowed updates)"),
    ("CEL 'spec.customImage cannot be modified'", "upstream DockerMachine webhook"),
    ("spec.template.spec is immutable; create a new template instead", "upstream Docker*Template webhooks"),
    ("CEL \"metadata.name: Cluster name must be a valid label value", "upstream Cluster webhook (IsValidLabelValue)"),
    ("CEL \"metadata.name: MachineDeployment name must be a valid label value", "upstream MachineDeployment webhook (IsValidLabelValue)"),
    ("CEL 'one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set'",
     "upstream Cluster webhook"),
    ("cannot be removed'", "upstream Cluster webhook"),
    ("CEL 'clusterSelector must not be empty", "upstream ClusterResourceSet webhook"),
    ("CEL 'clusterSelector is immutable'", "upstream ClusterResourceSet webhook"),
    ("CEL 'strategy is immutable'", "upstream ClusterResourceSet webhook"),
    # ClusterClass and Cluster.spec.topology (upstream's CRDs have no CEL there; its webhooks check these)
    ("CEL 'spec.topology cannot be removed from an existing Cluster'", "upstream Cluster webhook"),
    ("CEL 'replicas cannot be set if the MachineDeploymentTopology has autoscaler annotations'",
     "upstream Cluster webhook (validateAutoscalerAnnotationsForCluster)"),
    ("CEL 'maxUnavailable and maxSurge cannot both be 0'",
     "upstream ClusterClass/Cluster webhooks (validateRolloutStrategy)"),
    ("maxLength 32 (upstream None)", "deliberate: bounds the CEL cost of the int-or-percent rules in ClusterClass "
     "and topology lists (upstream's webhook rejects any such string that is not a valid int percentage)"),
    ("CEL 'healthCheck can be only set if spec.controlPlane.machineInfrastructure is set'",
     "upstream ClusterClass webhook (validateMachineHealthCheckClasses)"),
    ("CEL 'template kind must be of form \"<name>Template\"'",
     "upstream ClusterClass webhook (ClusterClassTemplateIsValid)"),
    ("cannot be changed, to prevent incompatible changes in the Clusters'",
     "upstream ClusterClass webhook (ClusterClassesAreCompatible: template group and kind)"),
    ("CEL 'machineInfrastructure cannot be added or removed",
     "upstream ClusterClass webhook (ClusterClassesAreCompatible)"),
    ("CEL '\"builtin\" is a reserved variable name'", "upstream ClusterClass webhook (variable names)"),
    ("CEL 'variable name cannot contain \".\"'", "upstream ClusterClass webhook (variable names)"),
    ("CEL '\"inline\" can not be used as the name of a patch'", "upstream ClusterClass webhook (patch names)"),
    ("CEL 'one of definitions or external must be defined'", "upstream ClusterClass webhook (patches)"),
    ("CEL 'only one of definitions or external can be defined'", "upstream ClusterClass webhook (patches)"),
    ("CEL 'one of validateTopologyExtension and generatePatchesExtension must be defined'",
     "upstream ClusterClass webhook (external patches)"),
    ("CEL 'no selector enabled", "upstream ClusterClass webhook (validateSelectors)"),
    ("CEL 'jsonPatch path must start with \"/spec\"'", "upstream ClusterClass webhook (validateJSONPatches)"),
    ("CEL 'valueFrom must set either template or variable'", "upstream ClusterClass webhook (add/replace ops)"),
    ("CEL 'valueFrom can not set both template and variable'", "upstream ClusterClass webhook (add/replace ops)"),
    ("CEL 'not a defined builtin variable'", "upstream ClusterClass webhook (builtinVariables)"),
]

# Every way a capd-py CRD accepts what upstream's CRD rejects (hack/compare_upstream_crds.py laxer()), for the
# kinds in LAXER_CHECKED, each with why. (Checks upstream's webhooks make that no CRD can are listed in
# docs/DEVELOPING.md "Validation".) Same rules as above: new differences and unused entries fail.
LAXER_CHECKED = {"cluster.x-k8s.io_clusterclasses.yaml", "cluster.x-k8s.io_clusters.yaml"}
LAXER_THAN_UPSTREAM_CRDS: list[tuple[str, str]] = [
    (".spec.patches[].definitions[].jsonPatches: maxItems None (upstream 100)",
     "deliberate: with upstream's 1000 x 100 x 100 bound the apiserver estimates every jsonPatch rule (path, "
     "valueFrom, builtin variables) over its CEL cost budget; unbounded, it estimates from the request size"),
]


def _compare_tool() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "hack" / "compare_upstream_crds.py"
    spec = importlib.util.spec_from_file_location("compare_upstream_crds", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_unexplained_strictness() -> None:
    """No capd-py CRD rejects what upstream's accepts, beyond the listed (and explained) differences."""
    diffs = _compare_tool().compare()
    served_files = {f"{c['spec']['group']}_{c['spec']['names']['plural']}.yaml" for c in load_crds()}
    assert set(diffs) == served_files, "vendor upstream's schema of every served kind (--vendor)"
    _assert_explained(diffs, STRICTER_THAN_UPSTREAM_CRDS, "stricter")


def test_no_unexplained_laxness() -> None:
    """ClusterClass and Cluster accept nothing upstream's CRDs reject, beyond the listed differences."""
    diffs = {n: ds for n, ds in _compare_tool().compare(how=_compare_tool().laxer).items() if n in LAXER_CHECKED}
    assert set(diffs) == LAXER_CHECKED
    _assert_explained(diffs, LAXER_THAN_UPSTREAM_CRDS, "laxer")


def _assert_explained(diffs: dict[str, list[str]], explained: list[tuple[str, str]], how: str) -> None:
    """Every difference is explained by a listed pattern, and every listed pattern still explains one."""
    unexplained = [f"{n}: {d}" for n, ds in diffs.items() for d in ds if not any(pat in d for pat, _ in explained)]
    assert not unexplained, f"{how} than upstream:\n" + "\n".join(unexplained)
    unused = [pat for pat, _ in explained if not any(pat in d for ds in diffs.values() for d in ds)]
    assert not unused, f"no longer {how} than upstream, drop from the list: {unused}"


def test_compare_tool_finds_laxer_rules() -> None:
    tool = _compare_tool()
    up = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "maxLength": 5, "pattern": "^a$"}, "l": {
            "type": "array", "maxItems": 3, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
            "items": {"type": "object", "properties": {"k": {"type": "string", "enum": ["X"]}}}},
        "o": {"type": "object", "properties": {"p": {"type": "string"}},
              "x-kubernetes-validations": [{"rule": "has(self.p)", "message": "m"}]}}}
    ours = {"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 9}, "l": {"type": "array", "items": {
            "type": "object", "properties": {"k": {"type": "string"}}}},
        "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    assert tool.laxer(ours, up) == [
        ": does not require ['a']", ".a: maxLength 9 (upstream 5)", ".a: pattern None (upstream '^a$')",
        ".l: maxItems None (upstream 3)", ".l: list-map keys None (upstream ['k'])",
        ".l[].k: enum None (upstream ['X'])", ".o: not validated (preserve-unknown-fields)"]
    assert tool.laxer(up, up) == []
    # a property named "description" is kept when vendoring (only schema descriptions are dropped)
    assert tool._strip({"description": "d", "properties": {"description": {"type": "string", "description": "x"}}}) \
        == {"properties": {"description": {"type": "string"}}}


def test_compare_tool_finds_stricter_rules() -> None:
    tool = _compare_tool()
    up = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "object", "nullable": True},
                                           "n": {"type": "integer", "minimum": 0}, "e": {"type": "string",
                                                                                         "enum": ["X", "Y"]}}}
    ours = {"type": "object", "required": ["a"], "properties": {
        "a": {"type": "string", "minLength": 1, "pattern": "^a$"}, "b": {"type": "object"},
        "n": {"type": "integer", "minimum": 1, "x-kubernetes-validations": [{"rule": "self < 9", "message": "m"}]},
        "e": {"type": "string", "enum": ["X"]}}}
    assert tool.differences(ours, up) == [
        ": requires ['a']", ".a: minLength 1 (upstream None)", ".a: pattern '^a$' (upstream None)",
        ".b: not nullable", ".n: minimum 1 (upstream 0)", ".n: CEL 'm'", ".e: enum ['X'] (upstream ['X', 'Y'])"]
    assert tool.differences({"type": "object", "properties": {}}, up)[0] == ".a: unknown to capd-py"
    assert tool.differences(up, up) == []


@pytest.mark.parametrize("name", FILES)
async def test_upstream_templates_are_admitted(kube: Kube, namespace: str, name: str) -> None:
    kinds = served()
    failures: list[str] = []
    for version in KUBERNETES_VERSIONS:
        for obj in documents(name, namespace, version):
            key = (obj["apiVersion"], obj["kind"])
            if key not in kinds:
                assert key in EXPECTED_NOT_SERVED, f"{name}: {key} is neither served nor listed as not served"
                continue
            for err in await _admit(kube, kinds[key], obj):
                failures.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {err}")
    assert not failures, f"{name}: upstream objects rejected:\n" + "\n".join(failures)


# upstream-valid shapes the templates do not all show: empty templates, null/empty selectors, names
SHAPES: list[tuple[str, str]] = [
    ("kubeadmconfigtemplate-no-spec", """
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfigTemplate
metadata: {name: md-0}
"""),
    ("kubeadmcontrolplanetemplate-no-spec", """
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: cp}
"""),
    ("dockermachinetemplate-empty", """
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachineTemplate
metadata: {name: md-0}
spec: {template: {spec: {}}}
"""),
    ("dockerclustertemplate-empty", """
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerClusterTemplate
metadata: {name: dc}
spec: {template: {spec: {}}}
"""),
    ("dockercluster-no-spec", """
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerCluster
metadata: {name: dc}
"""),
    ("machinedeployment-empty-selector", """
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: md-0}
spec:
  clusterName: c1
  selector: {}
  template:
    spec:
      clusterName: c1
      version: v1.30.14
      bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: md-0}}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: md-0}
"""),
    ("machineset-null-matchlabels", """
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineSet
metadata: {name: ms-0}
spec:
  clusterName: c1
  selector: {matchLabels: null}
  template:
    spec:
      clusterName: c1
      bootstrap: {dataSecretName: boot}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: md-0}
"""),
    ("machinehealthcheck-empty-selector", """
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata: {name: mhc}
spec: {clusterName: c1, selector: {}}
"""),
    ("cluster-name-with-dots", """
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: team.prod.c1}
spec:
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerCluster, name: dc}
"""),
    ("kcp-oldest-upstream-version", """
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: cp}
spec:
  version: v1.30.0
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachineTemplate, name: cp}
"""),
]


@pytest.mark.parametrize("doc", [s for _, s in SHAPES], ids=[i for i, _ in SHAPES])
async def test_upstream_valid_shapes_are_admitted(kube: Kube, namespace: str, doc: str) -> None:
    obj = yaml.safe_load(doc)
    obj["metadata"]["namespace"] = namespace
    g = served()[(obj["apiVersion"], obj["kind"])]
    assert await _admit(kube, g, obj) == []
