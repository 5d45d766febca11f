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
flavors are v1beta1), converted by the webhook, and upstream's defaulting and validating webhooks are registered
(capd_py.kube.admission_webhook); one webhook process of its own serves both for this module.

ADMISSION is the table of inputs checked against upstream's webhooks (each entry names the upstream rule): whether
upstream accepts or refuses it, the field its refusal names, and for accepted inputs what upstream's defaulting
webhook fills in.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import gvk, versions
from capd_py.kube import admission_webhook
from capd_py.kube.client import FIELD_MANAGER, Kube, KubeError
from capd_py.kube.conversion_webhook import crds_serving_v1beta1, webhook_conversion
from capd_py.kube.crds import load_crds
from capd_py.reconcile.servingcert import host_mode_url, new_webhook_ca
from capd_py.testing import envsubst
from capd_py.testing.conversion import contains, started_as_init_does
from capd_py.testing.envsubst import E2E_VARIABLES
from capd_py.testing.envtest import EnvTest, free_port

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
FILES = sorted(p.name for p in UPSTREAM.glob("*.yaml"))
Obj = dict[str, Any]

# (apiVersion, kind) in upstream's templates that capd-py does not serve (yet): the dev provider's templates. The
# v1beta1 objects (upstream's runtime-SDK flavors) are served through the conversion webhook.
# (empty since capd-py serves upstream v1.14's Dev* kinds, the last ones upstream's templates use: docs/dev-kinds.md)
EXPECTED_NOT_SERVED: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def envtest() -> Iterator[EnvTest]:
    """This module's API server (replaces the shared one for `kube` and `namespace`): CRDs and admission webhook
    configurations as `capd-py init` installs them, the webhook server running for the whole module."""
    with started_as_init_does() as started:
        yield started


# upstream v1.13's oldest supported workload version, capd-py's default, upstream release-1.13's e2e version
KUBERNETES_VERSIONS = [versions.MIN_SUPPORTED, versions.DEFAULT_VERSION, "v1.36.3", "v1.37.0-rc.1"]


@functools.cache  # 1.1 s of CPU each time (every CRD rendered with its conversion webhook); 30 tests ask
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
    return envsubst.documents(UPSTREAM / name, values, namespace)


def test_every_fixture_names_its_upstream_source() -> None:
    assert len(FILES) >= 20 and "e2e-cluster-template.yaml" in FILES
    for n in FILES:
        head = (UPSTREAM / n).read_text().splitlines()[:3]
        assert head[0].startswith("# Upstream Cluster API release-1.13 (") and "render-upstream-templates" in head[2], n


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
# expresses, or a deliberate capd-py rule (docs/validation.md "Upstream parity"). A new difference fails
# test_no_unexplained_strictness, an entry nothing matches any more fails it too (the list only shrinks).
STRICTER_THAN_UPSTREAM_CRDS: list[tuple[str, str]] = [
    (".metadata.labels{*}: maxLength 63", "upstream webhooks: ObjectMeta.Validate (label values)"),
    (".matchLabels{*}: maxLength 63", "upstream webhooks: metav1.LabelSelectorAsSelector"),
    (".matchExpressions[].operator: enum", "upstream webhooks: metav1.LabelSelectorAsSelector"),
    (".matchLabels: maxProperties 64", "deliberate: bounds the CEL cost of the selector-matches-labels rule"),
    ("CEL 'clusterName is immutable'", "upstream ClusterResourceSetBinding webhook"),
    ("CEL 'taints feature for MachinePools is not yet implemented'", "upstream MachinePool webhook"),
    ("CEL 'order must not be set if drain behavior is", "upstream MachineDrainRule webhook"),
    ("CEL \"values: for 'In', 'NotIn' operators, values set can't be empty",
     "upstream MachineDrainRule webhook: metav1.LabelSelectorAsSelector of every selector"),
    ("CEL 'spec.template.metadata.labels must match spec.selector.matchLabels'",
     "upstream MachineSet/Deployment webhooks (selector must match the template labels)"),
    ("CEL 'must be a valid semantic version", "upstream webhooks (KubeSemver); deliberate: strict semver 2.0"),
    ("CEL 'Kubernetes version is not supported", "deliberate, a KubeadmControlPlane's only: the supported range "
     "(capd_py/api/versions.py), which bounds the skip-a-minor rule's integers"),
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
    ("CEL \"metadata.name: MachineDeployment name must be a valid label value",
     "upstream MachineDeployment webhook (IsValidLabelValue)"),
    ("CEL 'one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set'",
     "upstream Cluster webhook"),
    ("cannot be removed'", "upstream Cluster webhook"),
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

# Every way a capd-py CRD accepts what upstream's CRD rejects (hack/compare_upstream_crds.py laxer()), for every
# served kind, each with why. (Checks upstream's webhooks make that no CRD can are listed in docs/validation.md.)
# Same rules as above: new differences and unused entries fail.
LAXER_THAN_UPSTREAM_CRDS: list[tuple[str, str]] = [
    (".spec.patches[].definitions[].jsonPatches: maxItems None (upstream 100)",
     "deliberate: with upstream's 1000 x 100 x 100 bound the apiserver estimates every jsonPatch rule (path, "
     "valueFrom, builtin variables) over its CEL cost budget; unbounded, it estimates from the request size"),
    (".matchLabels: nullable",
     "deliberate: upstream's templates write `matchLabels:` (null); a create drops it, but server-side apply refuses "
     "a null for a field that is not nullable (hack/gen_crds.py label_selector)"),
    (".spec.template: minProperties None (upstream 1)",
     "the kubeadm templates (and the KCP template's spec and machineTemplate): capd-py's v1beta1 conversion gives "
     "`template: {}` for a template whose spec is empty once converted (upstream's v1.10 development ClusterClass: "
     "`joinConfiguration: {nodeRegistration: {}}`), which the bound would refuse on the topology's clone and on "
     "`move` (found 2026-12-07); how upstream stores that object is to be asked of its plane"),
    (".spec.template.spec: minProperties None (upstream 1)", "as .spec.template"),
    (".spec.template.spec.machineTemplate: minProperties None (upstream 1)", "as .spec.template"),
    (".spec.template.spec.machineTemplate.spec: minProperties None (upstream 1)", "as .spec.template"),
    (": does not require ['metadata']",
     "the root of a MachineDrainRule: the API server refuses an object without metadata.name before any schema"),
    (": not validated (preserve-unknown-fields)",
     "kubeadm's untyped corners (extraEnvs/extraVolumes items, diskSetup, ignition, bootstrapTokens, patches, "
     "timeouts, discovery.file): kept as given, not yet typed; capd-py's KubeadmConfig admission checks "
     "diskSetup and ignition as upstream's webhook (api/admission/kubeadm.py)"),
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
    """No capd-py CRD accepts what upstream's rejects, beyond the listed (and explained) differences."""
    diffs = _compare_tool().compare(how=_compare_tool().laxer)
    assert set(diffs) == {f"{c['spec']['group']}_{c['spec']['names']['plural']}.yaml" for c in load_crds()}
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
    # an object the Kubernetes version does not change (a ClusterClass, a template) is the same request at every
    # version, with the same verdict (dry-run: nothing persists between them): sent once
    sent: set[str] = set()
    for version in KUBERNETES_VERSIONS:
        for obj in documents(name, namespace, version):
            key = (obj["apiVersion"], obj["kind"])
            if key not in kinds:
                assert key in EXPECTED_NOT_SERVED, f"{name}: {key} is neither served nor listed as not served"
                continue
            request = json.dumps(obj, sort_keys=True)
            if request in sent:
                continue
            sent.add(request)
            for err in await _admit(kube, kinds[key], obj):
                failures.append(f"{version} {obj['kind']}/{obj['metadata']['name']}: {err}")
    gate = NEEDS_FEATURE_GATE.get(name)
    if gate is not None:
        # upstream refuses these too unless the gate is on (upstream's e2e config turns it on for this flavor)
        gated = [f for f in failures if f"the feature gate {gate} is disabled" in f
                 or f"the {gate} feature flag is enabled" in f or f"the {gate} feature gate is enabled" in f]
        assert gated, f"{name}: expected refusals while {gate} is off (upstream's default)"
        failures = [f for f in failures if f not in gated]
    assert not failures, f"{name}: upstream objects rejected:\n" + "\n".join(failures)


# flavors upstream's e2e runs with a feature gate that is off by default in upstream v1.13 and in capd-py (on with
# `capd-py controllers --feature-gates`, which the webhook follows); upstream's webhooks refuse their objects without
NEEDS_FEATURE_GATE = {"e2e-cluster-template-kcp-md-taints.yaml": "MachineTaintPropagation",
                      # its Cluster's topology taints (upstream's Cluster webhook: validateTopologyTaints)
                      "e2e-cluster-template-topology-taints.yaml": "MachineTaintPropagation",
                      # its KubeadmConfigTemplate's format: ignition (KubeadmConfigSpec.validateIgnition; capd-py
                      # cannot turn this gate on: its node images boot cloud-init data only)
                      "e2e-cluster-template-ignition.yaml": "KubeadmBootstrapFormatIgnition",
                      # ClusterClasses with external patches (upstream's ClusterClass webhook)
                      "e2e-clusterclass-in-memory.yaml": "RuntimeSDK",
                      "e2e-clusterclass-quick-start-runtimesdk.yaml": "RuntimeSDK",
                      "e2e-clusterclass-quick-start-runtimesdk-v1beta1.yaml": "RuntimeSDK"}


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


# -- the admission table: capd-py's CRDs + webhooks against upstream release-1.13's webhooks -----------------------

INFRA = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "t"}
BOOT = {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "t"}


def _md(name: str = "md-0", **spec: Any) -> Obj:
    out: Obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": name},
                "spec": {"clusterName": "c1", "template": {"spec": {
                    "clusterName": "c1", "version": "v1.34.4", "bootstrap": {"configRef": BOOT},
                    "infrastructureRef": INFRA}}}}
    return _merge(out, {"spec": spec})


def _ms(name: str = "ms-0", **spec: Any) -> Obj:
    return _merge(_md(name, **spec), {"kind": "MachineSet"})


def _machine(**spec: Any) -> Obj:
    out: Obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m-0"},
                "spec": {"clusterName": "c1", "version": "v1.34.4", "bootstrap": {"dataSecretName": "boot"},
                         "infrastructureRef": {**INFRA, "kind": "DockerMachine"}}}
    return _merge(out, {"spec": spec})


def _kcp(**spec: Any) -> Obj:
    out: Obj = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                "metadata": {"name": "cp"},
                "spec": {"version": "v1.34.4", "machineTemplate": {"spec": {"infrastructureRef": INFRA}}}}
    return _merge(out, {"spec": spec})


def _mhc(**spec: Any) -> Obj:
    out: Obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck", "metadata": {"name": "mhc"},
                "spec": {"clusterName": "c1", "selector": {"matchLabels": {"role": "worker"}}}}
    return _merge(out, {"spec": spec})


def _crs(**spec: Any) -> Obj:
    out: Obj = {"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
                "metadata": {"name": "crs"},
                "spec": {"clusterSelector": {"matchLabels": {"cni": "ok"}},
                         "resources": [{"kind": "ConfigMap", "name": "cni"}]}}
    return _merge(out, {"spec": spec})


def _cluster(name: str = "c1", **spec: Any) -> Obj:
    out: Obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
                "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster",
                                               "name": "dc"}}}
    return _merge(out, {"spec": spec})


def _mp(**spec: Any) -> Obj:
    out: Obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "metadata": {"name": "mp-0"},
                "spec": {"clusterName": "c1", "template": {"spec": {
                    "clusterName": "c1", "version": "v1.34.4", "bootstrap": {"configRef": BOOT},
                    "infrastructureRef": {**INFRA, "kind": "DockerMachinePool"}}}}}
    return _merge(out, {"spec": spec})


def _kubeadm_config(kind: str = "KubeadmConfig", **spec: Any) -> Obj:
    body = spec if kind == "KubeadmConfig" else {"template": {"spec": spec}}
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": kind, "metadata": {"name": "kc"},
            "spec": body}


def _merge(base: Any, patch: Any) -> Any:
    """JSON merge patch (RFC 7386): None deletes."""
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _annotated(obj: Obj, annotations: dict[str, str]) -> Obj:
    return _merge(obj, {"metadata": {"annotations": annotations}})


STACKED = {"kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {"dataDir": "/var/lib/etcd"}}}}}
EXTERNAL = {"kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"external": {
    "endpoints": ["https://10.0.0.1:2379"], "caFile": "/etc/ca.crt", "certFile": "/etc/c.crt",
    "keyFile": "/etc/c.key"}}}}}
SELECTOR_A = {"matchLabels": {"app": "a"}}
LONG = "a" * 64


@dataclasses.dataclass(frozen=True)
class Case:
    """`obj` created (dry run), or first created for real and then `update` merged in (dry run), or scaled to
    `scale` through the scale subresource. `refused`: the field upstream's refusal names ("" = upstream accepts);
    `defaults`: what upstream's defaulting webhook fills in (checked in the object the API server returns)."""

    id: str
    upstream: str          # the upstream rule (file: function)
    obj: Obj
    refused: str = ""
    update: Obj | None = None
    scale: int | None = None
    defaults: Obj | None = None


MD, MS, MA = "internal/webhooks/machinedeployment.go", "internal/webhooks/machineset.go", "internal/webhooks/machine.go"
KCP = "controlplane/kubeadm/internal/webhooks/kubeadmcontrolplane.go"
KC = "api/bootstrap/kubeadm/v1beta2/kubeadmconfig_types.go KubeadmConfigSpec.Validate"
MHC, CL = "internal/webhooks/machinehealthcheck.go", "internal/webhooks/cluster.go"
MP = "internal/webhooks/machinepool.go"
CRS = "internal/webhooks/clusterresourceset.go"
DC = "test/infrastructure/docker/internal/webhooks/dockercluster.go"
DCT = "test/infrastructure/docker/internal/webhooks/dockerclustertemplate.go"
KCPT = "controlplane/kubeadm/internal/webhooks/kubeadmcontrolplanetemplate.go"


def _kcp_template() -> Obj:
    return {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
            "metadata": {"name": "cpt"}, "spec": {"template": {"spec": {"kubeadmConfigSpec": {
                "files": [{"path": "/a", "content": "x"}]}}}}}


def _dockercluster(domains: list[Obj]) -> Obj:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
            "metadata": {"name": "dc"}, "spec": {"failureDomains": domains}}
DEFAULT_MD = {"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}}, "spec": {
    "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "md-0", "cluster.x-k8s.io/cluster-name": "c1"}},
    "template": {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "md-0",
                                         "cluster.x-k8s.io/cluster-name": "c1"}}},
    "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}}

AUTOSCALE_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALE_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
AUTOSCALE_0_3 = {AUTOSCALE_MIN: "0", AUTOSCALE_MAX: "3"}

ADMISSION: list[Case] = [
    # MachineDeployment
    Case("md-without-selector", f"{MD} Default (selector, template labels, rollout strategy)", _md(),
         defaults=DEFAULT_MD),
    Case("md-autoscaler-from-zero", f"{MD} calculateMachineDeploymentReplicas (new MD: min size; no CRD default)",
         _merge(_md(), {"metadata": {"annotations": AUTOSCALE_0_3}}), defaults={"spec": {"replicas": 0}}),
    Case("md-autoscaler-handover-above-max", f"{MD} calculateMachineDeploymentReplicas (old above max: max)",
         _md(replicas=5), update={"metadata": {"annotations": AUTOSCALE_0_3}, "spec": {"replicas": None}},
         defaults={"spec": {"replicas": 3}}),
    Case("md-autoscaler-size-unparsable", f"{MD} calculateMachineDeploymentReplicas (ParseInt error: Denied)",
         _merge(_md(), {"metadata": {"annotations": {**AUTOSCALE_0_3, AUTOSCALE_MAX: "three"}}}),
         refused='parsing "three": invalid syntax'),
    Case("ms-autoscaler-from-zero", f"{MS} calculateMachineSetReplicas (new MS: min size; no CRD default)",
         _merge(_ms(), {"metadata": {"annotations": AUTOSCALE_0_3}}), defaults={"spec": {"replicas": 0}}),
    Case("md-name-64-chars", f"{MD} validate (name as label value)", _md(LONG), refused="metadata.name"),
    Case("md-name-63-chars", f"{MD} validate", _md(LONG[:63])),
    Case("md-name-not-a-subdomain", "the API server's ObjectMeta validation (RFC 1123 subdomain), before the webhook",
         _md("-a"), refused="a lowercase RFC 1123 subdomain"),
    Case("md-name-with-dots", f"{MD} validate (dots are label-value characters)", _md("md.0")),
    Case("md-version-without-v", f"{MD} Default (v prefix)",
         _md(template={"spec": {"version": "1.34.4"}}),
         defaults={"spec": {"template": {"spec": {"version": "v1.34.4"}}}}),
    Case("md-version-not-semver", f"{MD} validate (KubeSemver)", _md(template={"spec": {"version": "v1.34"}}),
         refused="spec.template.spec.version"),
    Case("md-selector-not-matching-template", f"{MD} validate (selector matches template labels)",
         _md(selector=SELECTOR_A, template={"metadata": {"labels": {"app": "b"}}}),
         refused="spec.template.metadata.labels"),
    Case("md-selector-matching-template", f"{MD} Default keeps a given selector, adds cluster-name",
         _md(selector=SELECTOR_A, template={"metadata": {"labels": {"app": "a"}}}),
         defaults={"spec": {"selector": {"matchLabels": {"app": "a", "cluster.x-k8s.io/cluster-name": "c1"}}}}),
    Case("md-maxsurge-and-maxunavailable-0", f"{MD} validateRolloutStrategy",
         _md(rollout={"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}),
         refused="spec.rollout.strategy.rollingUpdate"),
    Case("md-maxsurge-percent", f"{MD} validateRolloutStrategy",
         _md(rollout={"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}}}),
         defaults={"spec": {"rollout": {"strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}}}}}),
    Case("md-template-clustername-differs", f"{MD} validate",
         _md(template={"spec": {"clusterName": "c2"}}), refused="spec.clusterName"),
    Case("md-without-bootstrap", f"{MD} validate (bootstrap)",
         _merge(_md(), {"spec": {"template": {"spec": {"bootstrap": None}}}}), refused="spec.template.spec.bootstrap"),
    Case("md-unknown-preflight-check-skipped", f"{MD} validateSkippedMachineSetPreflightChecks",
         _annotated(_md(), {"machineset.cluster.x-k8s.io/skip-preflight-checks": "NoSuchCheck"}),
         refused="metadata.annotations"),
    Case("md-known-preflight-check-skipped", f"{MD} validateSkippedMachineSetPreflightChecks",
         _annotated(_md(), {"machineset.cluster.x-k8s.io/skip-preflight-checks": "KubeadmVersionSkew, All"})),
    Case("md-naming-without-random", f"{MD} validateMDMachineNaming",
         _md(machineNaming={"template": "{{ .machineSet.name }}-x"}), refused="spec.machineNaming.template"),
    Case("md-naming-with-random", f"{MD} validateMDMachineNaming",
         _md(machineNaming={"template": "{{ .machineSet.name }}-{{ .random }}"})),
    Case("md-template-label-key-invalid", f"{MD} validate (template ObjectMeta.Validate)",
         _md(selector=SELECTOR_A, template={"metadata": {"labels": {"app": "a", "bad key": "x"}}}),
         refused="spec.template.metadata.labels"),
    Case("cluster-topology-taints-gate-off", f"{CL} validateTopologyTaints (MachineTaintPropagation off)",
         _cluster(topology={"classRef": {"name": "quick-start"}, "version": "v1.34.4", "controlPlane": {"taints": [
             {"key": "a", "effect": "NoSchedule", "propagation": "Always"}]}}),
         refused="spec.topology.controlPlane.taints"),
    Case("md-taints-gate-off", f"{MD} validate (taints.ValidateMachineTaints, MachineTaintPropagation off)",
         _md(template={"spec": {"taints": [{"key": "a", "effect": "NoSchedule", "propagation": "Always"}]}}),
         refused="spec.template.spec.taints"),
    Case("md-update-clustername", f"{MD} validate (clusterName immutable)", _md(),
         update={"spec": {"clusterName": "c2", "template": {"spec": {"clusterName": "c2"}}}},
         refused="spec.clusterName"),
    Case("md-update-replicas", f"{MD} validate", _md(), update={"spec": {"replicas": 5}}),
    Case("md-scale-to-0", f"{MD} (no scale webhook)", _md(), scale=0),
    # MachineSet
    Case("ms-without-selector", f"{MS} Default (set-name selector)", _ms(), defaults={"spec": {
        "selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "ms-0"}},
        "template": {"metadata": {"labels": {"cluster.x-k8s.io/set-name": "ms-0"}}}}}),
    Case("ms-name-64-chars", f"{MS} Default (format.MustFormatValue hashes the label value)", _ms(LONG),
         defaults={"spec": {"selector": {"matchLabels": {"cluster.x-k8s.io/set-name": "hash_2W8PhQ_z"}}}}),
    Case("ms-selector-not-matching-template", f"{MS} validate",
         _ms(selector=SELECTOR_A, template={"metadata": {"labels": {"app": "b"}}}),
         refused="spec.template.metadata.labels"),
    Case("ms-naming-template-not-a-name", f"{MS} validateMSMachineNaming",
         _ms(machineNaming={"template": "{{ .machineSet.name }}_{{ .random }}"}),
         refused="spec.machineNaming.template"),
    # clusterName and bootstrap: the webhooks' (capd-py's CRDs had CEL rules for them until 2026-12-08)
    Case("ms-template-clustername-differs", f"{MS} validate", _ms(template={"spec": {"clusterName": "c2"}}),
         refused="spec.clusterName"),
    Case("ms-update-clustername", f"{MS} validate (clusterName immutable)", _ms(),
         update={"spec": {"clusterName": "c2", "template": {"spec": {"clusterName": "c2"}}}},
         refused="spec.clusterName"),
    Case("ms-without-bootstrap", f"{MS} validate (bootstrap)",
         _merge(_ms(), {"spec": {"template": {"spec": {"bootstrap": None}}}}),
         refused="spec.template.spec.bootstrap"),
    # Machine
    # (upstream also writes nodeDeletionTimeoutSeconds: 10, which capd-py reads from absence: docs "Validation")
    Case("machine-defaults", f"{MA} Default (label, v prefix)", _machine(version="1.34.4"),
         defaults={"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}}, "spec": {"version": "v1.34.4"}}),
    Case("machine-without-bootstrap", f"{MA} validate", _merge(_machine(), {"spec": {"bootstrap": None}}),
         refused="spec.bootstrap"),
    Case("machine-reserved-taint", f"{MA} validate (taints)",
         _machine(taints=[{"key": "node.kubernetes.io/foo", "effect": "NoSchedule", "propagation": "Always"}]),
         refused="spec.taints"),
    Case("machine-update-clustername", f"{MA} validate", _machine(), update={"spec": {"clusterName": "c2"}},
         refused="spec.clusterName"),
    Case("machine-update-provider-id", f"{MA} validate", _machine(), update={"spec": {"providerID": "docker:////m"}}),
    # KubeadmControlPlane
    Case("kcp-2-replicas-stacked-etcd", f"{KCP} validateKubeadmControlPlaneSpec (odd replicas)", _kcp(replicas=2),
         refused="spec.replicas"),
    Case("kcp-2-replicas-external-etcd", f"{KCP} validateKubeadmControlPlaneSpec", _kcp(replicas=2, **EXTERNAL)),
    Case("kcp-3-replicas-defaults", f"{KCP} Default (rollout strategy)", _kcp(replicas=3, **STACKED),
         defaults={"spec": {"rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}}),
    Case("kcp-version-without-v", f"{KCP} Default (v prefix)", _kcp(version="1.34.4"),
         defaults={"spec": {"version": "v1.34.4", "replicas": 1}}),
    Case("kcp-scale-to-2", "controlplane/kubeadm/internal/webhooks/scale.go", _kcp(), scale=2, refused="replicas"),
    Case("kcp-scale-to-3", "controlplane/kubeadm/internal/webhooks/scale.go", _kcp(), scale=3),
    Case("kcp-update-to-4-replicas", f"{KCP} ValidateUpdate", _kcp(), update={"spec": {"replicas": 4}},
         refused="spec.replicas"),
    Case("kcp-update-certificates-dir", f"{KCP} ValidateUpdate (allowed paths)", _kcp(),
         update={"spec": {"kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/x"}}}},
         refused="spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir"),
    Case("kcp-update-pre-kubeadm-commands", f"{KCP} ValidateUpdate (allowed paths)", _kcp(),
         update={"spec": {"kubeadmConfigSpec": {"preKubeadmCommands": ["echo hi"]}}}),
    Case("kcp-update-skips-a-minor", f"{KCP} validateVersion", _kcp(), update={"spec": {"version": "v1.36.1"}},
         refused="spec.version"),
    Case("kcp-update-stacked-to-external", f"{KCP} validateClusterConfiguration", _kcp(**STACKED),
         update={"spec": _merge(EXTERNAL, {"kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": None}}}})},
         refused="spec.kubeadmConfigSpec.clusterConfiguration.etcd.external"),
    Case("kcp-scale-in-rollout-with-1-replica", f"{KCP} validateRolloutAndCertValidityFields",
         _kcp(rollout={"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}}),
         refused="spec.rollout.strategy.rollingUpdate"),
    Case("kcp-local-and-external-etcd", f"{KCP} validateClusterConfiguration",
         _kcp(kubeadmConfigSpec={"clusterConfiguration": {"etcd": {
             "local": {"dataDir": "/var/lib/etcd"},
             **EXTERNAL["kubeadmConfigSpec"]["clusterConfiguration"]["etcd"]}}}),
         refused="spec.kubeadmConfigSpec.clusterConfiguration.etcd.local"),
    Case("kcp-cert-validity-beyond-ca", f"{KCP} validateRolloutAndCertValidityFields",
         _kcp(kubeadmConfigSpec={"clusterConfiguration": {"certificateValidityPeriodDays": 400,
                                                          "caCertificateValidityPeriodDays": 300}}),
         refused="spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays"),
    Case("kcp-file-content-and-content-from", KC,
         _kcp(kubeadmConfigSpec={"files": [{"path": "/a", "content": "x",
                                            "contentFrom": {"secret": {"name": "s", "key": "k"}}}]}),
         refused="spec.kubeadmConfigSpec.files[0]"),
    Case("kcp-health-check-timeouts-differ", KC,
         _kcp(kubeadmConfigSpec={"initConfiguration": {"timeouts": {"controlPlaneComponentHealthCheckSeconds": 60}}}),
         refused="controlPlaneComponentHealthCheckSeconds"),
    # KubeadmControlPlaneTemplate
    Case("kcptemplate-update-spec", f"{KCPT} ValidateUpdate (spec.template.spec immutable)", _kcp_template(),
         update={"spec": {"template": {"spec": {"kubeadmConfigSpec": {"preKubeadmCommands": ["echo hi"]}}}}},
         refused="spec.template.spec"),
    Case("kcptemplate-update-labels", f"{KCPT} ValidateUpdate", _kcp_template(),
         update={"metadata": {"labels": {"team": "a"}}}),
    # KubeadmConfig / KubeadmConfigTemplate
    Case("kubeadmconfig-duplicate-file-paths", KC,
         _kubeadm_config(files=[{"path": "/a", "content": "x"}, {"path": "/a", "content": "y"}]),
         refused="spec.files[1].path"),
    Case("kubeadmconfigtemplate-duplicate-file-paths", KC,
         _kubeadm_config("KubeadmConfigTemplate",
                         files=[{"path": "/a", "content": "x"}, {"path": "/a", "content": "y"}]),
         refused="spec.template.spec.files[1].path"),
    Case("kubeadmconfig-valid-files", KC, _kubeadm_config(files=[{"path": "/a", "content": "x"},
                                                                  {"path": "/b", "content": "y"}])),
    # MachineHealthCheck
    Case("mhc-empty-selector", f"{MHC} validate", _merge(_mhc(), {"spec": {"selector": {"matchLabels": None}}}),
         refused="spec.selector"),
    Case("mhc-other-clusters-selector", f"{MHC} validate",
         _mhc(selector={"matchLabels": {"cluster.x-k8s.io/cluster-name": "c2"}}), refused="spec.selector"),
    Case("mhc-update-clustername", f"{MHC} validate (clusterName immutable)", _mhc(),
         update={"spec": {"clusterName": "c2"}}, refused="spec.clusterName"),
    Case("mhc-defaults", f"{MHC} Default (label, nodeStartupTimeoutSeconds)", _mhc(),
         defaults={"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                   "spec": {"checks": {"nodeStartupTimeoutSeconds": 600}}}),
    Case("mhc-startup-timeout-10s", f"{MHC} validateMachineHealthCheckNodeStartupTimeoutSeconds",
         _mhc(checks={"nodeStartupTimeoutSeconds": 10}), refused="spec.checks.nodeStartupTimeoutSeconds"),
    # ClusterResourceSet (upstream's webhook; capd-py's CRD has no CEL here since 2026-12-08, as upstream's)
    Case("crs-defaults", f"{CRS} Default (strategy)", _crs(), defaults={"spec": {"strategy": "ApplyOnce"}}),
    Case("crs-empty-selector", f"{CRS} validate (selector must not be empty)",
         _merge(_crs(), {"spec": {"clusterSelector": {"matchLabels": None}}}), refused="spec.clusterSelector"),
    Case("crs-selector-bad-label-value", f"{CRS} validate (LabelSelectorAsSelector)",
         _crs(clusterSelector={"matchLabels": {"cni": "-10%"}}), refused="spec.clusterSelector"),
    Case("crs-selector-label-value-64-chars", f"{CRS} validate (LabelSelectorAsSelector)",
         _crs(clusterSelector={"matchLabels": {"cni": LONG}}), refused="spec.clusterSelector"),
    Case("crs-selector-bad-operator", f"{CRS} validate (LabelSelectorAsSelector)",
         _crs(clusterSelector={"matchExpressions": [{"key": "cni", "operator": "Near"}]}),
         refused="spec.clusterSelector"),
    Case("crs-selector-expressions-only", f"{CRS} validate",
         _merge(_crs(), {"spec": {"clusterSelector": {"matchLabels": None, "matchExpressions": [
             {"key": "cni", "operator": "Exists"}]}}})),
    Case("crs-update-strategy", f"{CRS} validate (strategy immutable)", _crs(),
         update={"spec": {"strategy": "Reconcile"}}, refused="spec.strategy"),
    Case("crs-update-selector", f"{CRS} validate (clusterSelector immutable)", _crs(),
         update={"spec": {"clusterSelector": {"matchLabels": {"cni": "other"}}}}, refused="spec.clusterSelector"),
    Case("crs-update-resources", f"{CRS} validate", _crs(),
         update={"spec": {"resources": [{"kind": "Secret", "name": "other"}]}}),
    # Cluster
    Case("cluster-bad-pod-cidr", f"{CL} validateCIDRBlocks",
         _cluster(clusterNetwork={"pods": {"cidrBlocks": ["10.0.0.0/33"]}}),
         refused="spec.clusterNetwork.pods.cidrBlocks[0]"),
    Case("cluster-dual-stack-cidrs", f"{CL} validateCIDRBlocks",
         _cluster(clusterNetwork={"pods": {"cidrBlocks": ["192.168.0.0/16", "fd00:100:96::/48"]}})),
    Case("cluster-name-64-chars", f"{CL} validate (name as label value)", _cluster(LONG), refused="metadata.name"),
    Case("cluster-update-removes-infrastructure-ref", f"{CL} validate", _cluster(),
         update={"spec": {"infrastructureRef": None, "controlPlaneRef": {
             "apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "cp"}}},
         refused="spec.infrastructureRef"),
    # MachinePool
    Case("mp-defaults", f"{MP} Default (label, nodeDeletionTimeoutSeconds)", _mp(),
         defaults={"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                   "spec": {"template": {"spec": {"deletion": {"nodeDeletionTimeoutSeconds": 10}}}}}),
    Case("mp-taints", f"{MP} validate", _mp(template={"spec": {"taints": [
        {"key": "a", "effect": "NoSchedule", "propagation": "Always"}]}}), refused="taints"),
    Case("mp-template-clustername-differs", f"{MP} validate", _mp(template={"spec": {"clusterName": "c2"}}),
         refused="spec.clusterName"),
    Case("mp-update-clustername", f"{MP} validate (clusterName immutable)", _mp(),
         update={"spec": {"clusterName": "c2", "template": {"spec": {"clusterName": "c2"}}}},
         refused="spec.clusterName"),
    Case("mp-without-bootstrap", f"{MP} validate (bootstrap)",
         _merge(_mp(), {"spec": {"template": {"spec": {"bootstrap": None}}}}),
         refused="spec.template.spec.bootstrap"),
    # DockerCluster
    Case("dockercluster-failure-domains-unsorted", f"{DC} validateDockerClusterSpec",
         _dockercluster([{"name": "b"}, {"name": "a"}]), refused="spec.failureDomains"),
    Case("dockercluster-failure-domains-sorted", f"{DC} validateDockerClusterSpec",
         _dockercluster([{"name": "a"}, {"name": "b", "controlPlane": True}])),
    Case("dockercluster-defaults", f"{DC} defaultDockerClusterSpec (endpoint port, failure domains' controlPlane)",
         _dockercluster([{"name": "a"}, {"name": "b", "controlPlane": True}]),
         defaults={"spec": {"controlPlaneEndpoint": {"port": 6443},
                            "failureDomains": [{"name": "a", "controlPlane": False},
                                               {"name": "b", "controlPlane": True}]}}),
    Case("dockercluster-without-spec-defaults", f"{DC} defaultDockerClusterSpec",
         {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "metadata": {"name": "dc"}},
         defaults={"spec": {"controlPlaneEndpoint": {"port": 6443}}}),
    Case("dockercluster-given-port-kept", f"{DC} defaultDockerClusterSpec",
         {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "metadata": {"name": "dc"},
          "spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 7443}}},
         defaults={"spec": {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 7443}}}),
    Case("dockerclustertemplate-defaults", f"{DCT} Default (defaultDockerClusterSpec)",
         {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate",
          "metadata": {"name": "dct"}, "spec": {"template": {"spec": {"failureDomains": [{"name": "fd1"}]}}}},
         defaults={"spec": {"template": {"spec": {"controlPlaneEndpoint": {"port": 6443},
                                                  "failureDomains": [{"name": "fd1", "controlPlane": False}]}}}}),
]


def test_admission_table_is_large_and_has_both_outcomes() -> None:
    assert len(ADMISSION) >= 40
    assert len({c.id for c in ADMISSION}) == len(ADMISSION)
    accepted = [c for c in ADMISSION if not c.refused]
    assert len(accepted) >= 15 and len(ADMISSION) - len(accepted) >= 25


async def _write(kube: Kube, namespace: str, case: Case) -> Obj:
    g = served()[(case.obj["apiVersion"], case.obj["kind"])]
    obj = _merge(case.obj, {"metadata": {"namespace": namespace}})
    dry = [("dryRun", "All"), ("fieldValidation", "Strict")]
    if case.update is None and case.scale is None:
        return dict(await kube.acall("POST", g.path(namespace), body=obj, query=dry))
    await kube.create(g, obj)
    name = obj["metadata"]["name"]
    if case.scale is not None:
        return dict(await kube.acall("PATCH", g.path(namespace, name, "scale"), body={"spec": {"replicas": case.scale}},
                                     query=dry, content_type="application/merge-patch+json"))
    return dict(await kube.acall("PATCH", g.path(namespace, name), body=case.update, query=dry,
                                 content_type="application/merge-patch+json"))


@pytest.mark.parametrize("case", ADMISSION, ids=[c.id for c in ADMISSION])
async def test_admission_as_upstream(kube: Kube, namespace: str, case: Case) -> None:
    try:
        got = await _write(kube, namespace, case)
    except KubeError as e:
        assert case.refused, f"upstream accepts {case.id} ({case.upstream}); capd-py refused: {e.status} {e.message}"
        assert e.status in (403, 422), e.message
        assert case.refused in e.message, f"{case.id}: upstream names {case.refused}; capd-py said {e.message}"
        return
    assert not case.refused, f"upstream refuses {case.id} ({case.upstream}, {case.refused}); capd-py accepted it"
    if case.defaults is not None:
        assert contains(got, case.defaults), f"{case.id}: upstream defaults {case.defaults}; capd-py stored {got}"


async def test_v1beta1_write_is_defaulted_too(kube: Kube, namespace: str) -> None:
    """A v1beta1 MachineDeployment without a selector is converted, defaulted by the webhook as upstream, stored."""
    md = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
          "metadata": {"name": "md-v1", "namespace": namespace},
          "spec": {"clusterName": "c1", "template": {"spec": {
              "clusterName": "c1", "version": "v1.34.4", "bootstrap": {"dataSecretName": "boot"},
              "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                    "kind": "DockerMachineTemplate", "name": "t"}}}}}
    await kube.create(served()[("cluster.x-k8s.io/v1beta1", "MachineDeployment")], md)
    hub = await kube.get(gvk.MACHINE_DEPLOYMENT, namespace, "md-v1")
    assert hub is not None
    assert hub["spec"]["selector"]["matchLabels"] == {"cluster.x-k8s.io/deployment-name": "md-v1",
                                                      "cluster.x-k8s.io/cluster-name": "c1"}


async def test_webhook_down_writes_fail_clearly_and_nothing_is_stored(kube: Kube, namespace: str) -> None:
    """capd-py's webhook configurations (failurePolicy Fail) pointing at a port nothing listens on, for this
    namespace only: a write is refused naming the webhook, and nothing is stored (undefaulted or unvalidated)."""
    dead = admission_webhook.configurations(new_webhook_ca().cert, url=host_mode_url("127.0.0.1", free_port()))
    for config in dead:
        config["metadata"]["name"] += "-down"
        for hook in config["webhooks"]:
            hook["name"] = "down-" + hook["name"]
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    md = _merge(_md("md-down"), {"metadata": {"namespace": namespace}})
    try:
        await admission_webhook.install(kube, dead)
        error: KubeError | None = None
        for _ in range(100):  # the API server picks the configurations up within a second or so
            try:
                await kube.acall("POST", gvk.MACHINE_DEPLOYMENT.path(namespace), body=md, query=[("dryRun", "All")])
            except KubeError as e:
                error = e
                break
            await asyncio.sleep(0.1)
        assert error is not None, "writes still pass with the webhook down"
        with pytest.raises(KubeError) as refused:
            await kube.create(gvk.MACHINE_DEPLOYMENT, md)
        assert refused.value.status == 500 and "failed calling webhook" in refused.value.message
        assert 'down-default.machinedeployment.cluster.x-k8s.io' in refused.value.message
        assert await kube.get(gvk.MACHINE_DEPLOYMENT, namespace, "md-down") is None
    finally:
        for config in dead:
            await kube.delete(admission_webhook.MUTATING if config["kind"].startswith("Mutating")
                              else admission_webhook.VALIDATING, None, config["metadata"]["name"])


async def test_v1beta1_write_is_validated_too(kube: Kube, namespace: str) -> None:
    """A v1beta1 KubeadmControlPlane with 2 replicas and stacked etcd: converted, refused by upstream's rule."""
    kcp = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane",
           "metadata": {"name": "cp-v1", "namespace": namespace},
           "spec": {"replicas": 2, "version": "v1.34.4", "kubeadmConfigSpec": {},
                    "machineTemplate": {"infrastructureRef": {
                        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachineTemplate",
                        "name": "t"}}}}
    with pytest.raises(KubeError) as refused:
        await kube.create(served()[("controlplane.cluster.x-k8s.io/v1beta1", "KubeadmControlPlane")], kcp)
    assert refused.value.status == 422
    assert "spec.replicas: Forbidden: cannot be an even number when etcd is stacked" in refused.value.message
    assert await kube.get(gvk.KUBEADM_CONTROL_PLANE, namespace, "cp-v1") is None
