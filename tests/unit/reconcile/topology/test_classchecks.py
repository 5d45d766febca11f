"""The Cluster's defaulting from its ClusterClass (upstream's Cluster defaulting webhook): variables defaulted,
values checked against the class's schemas with upstream's field paths, transition rules against the old Cluster."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.admission import fielderrors
from capd_py.reconcile.topology.classchecks import (
    UpgradeState,
    default_and_validate_variables,
    reconciled,
    validate_cluster_for_class,
    validate_clusterclass,
)

pytestmark = pytest.mark.unit


def klass(generation: int = 1, observed: int = 1, ready: str = "True") -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {
        "size": {"type": "integer", "minimum": 1, "default": 3,
                 "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "size may only grow"}]},
        "name": {"type": "string", "default": "x"}}, "default": {}}}
    plain = {"openAPIV3Schema": {"type": "string", "default": "img"}}
    return {"metadata": {"name": "cc", "generation": generation},
            "spec": {}, "status": {"observedGeneration": observed,
                                   "conditions": [{"type": "VariablesReady", "status": ready}],
                                   "variables": [
                                       {"name": "shape", "definitions": [{"from": "inline", "schema": schema}]},
                                       {"name": "image", "definitions": [{"from": "inline", "schema": plain}]}]}}


def cluster(variables: list[dict[str, Any]] | None = None, md_overrides: list[dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    topo: dict[str, Any] = {"classRef": {"name": "cc"}, "version": "v1.35.0"}
    if variables is not None:
        topo["variables"] = variables
    if md_overrides is not None:
        topo["workers"] = {"machineDeployments": [{"name": "md-0", "class": "w",
                                                   "variables": {"overrides": md_overrides}}]}
    return {"metadata": {"name": "c"}, "spec": {"topology": topo}}


def test_a_class_is_reconciled_when_its_generation_was_seen_and_its_variables_are_not_false() -> None:
    assert reconciled(klass())
    assert not reconciled(klass(generation=2, observed=1))
    assert not reconciled(klass(ready="False"))
    no_condition = klass()
    no_condition["status"]["conditions"] = []
    assert not reconciled(no_condition)


def test_missing_variables_get_their_defaults_in_definition_order() -> None:
    out, errs = default_and_validate_variables(cluster(), None, klass())
    assert errs == []
    assert out["spec"]["topology"]["variables"] == [{"name": "shape", "value": {"size": 3, "name": "x"}},
                                                    {"name": "image", "value": "img"}]


def test_a_value_its_schema_refuses_is_an_invalid_cause_at_upstreams_path() -> None:
    _, errs = default_and_validate_variables(cluster([{"name": "shape", "value": {"size": 0}}]), None, klass())
    assert [(e.type, e.field) for e in errs] == [(fielderrors.INVALID, "spec.topology.variables[shape].value.size")]
    assert "should be greater than or equal to 1" in errs[0].body()


def test_an_undefined_variable_and_an_override_are_checked_where_they_are() -> None:
    _, errs = default_and_validate_variables(
        cluster([{"name": "nope", "value": 1}], md_overrides=[{"name": "image", "value": 5}]), None, klass())
    assert [e.field for e in errs] == ["spec.topology.variables[nope]",
                                       "spec.topology.workers.machineDeployments[md-0].variables.overrides[image]"
                                       ".value"]


def test_transition_rules_compare_with_the_old_clusters_values() -> None:
    old = cluster([{"name": "shape", "value": {"size": 5}}])
    _, errs = default_and_validate_variables(cluster([{"name": "shape", "value": {"size": 4}}]), old, klass())
    # upstream quotes the whole variable value, defaults included
    assert [(e.field, e.body()) for e in errs] == [
        ("spec.topology.variables[shape].value.size",
         'Invalid value: "{\\"name\\":\\"x\\",\\"size\\":4}": size may only grow')]
    _, on_create = default_and_validate_variables(cluster([{"name": "shape", "value": {"size": 4}}]), None, klass())
    assert on_create == []


def _with_workers(cc: dict[str, Any]) -> dict[str, Any]:
    cc["spec"] = {"workers": {"machineDeployments": [
        {"class": "w", "metadata": {"annotations": {
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1"}}}]},
        "controlPlane": {}}
    return cc


def test_workers_must_name_a_class_of_the_clusterclass_once_each() -> None:
    c = cluster()
    c["spec"]["topology"]["workers"] = {"machineDeployments": [{"name": "a", "class": "w"}, {"name": "a", "class": "x"},
                                                               {"name": "", "class": "w"}]}
    errs = validate_cluster_for_class(c, None, _with_workers(klass()))
    assert [(e.type, e.field) for e in errs] == [
        (fielderrors.INVALID, "spec.topology.workers.machineDeployments[1].class"),
        (fielderrors.INVALID, "spec.topology.workers.machineDeployments[1].name"),
        (fielderrors.REQUIRED, "spec.topology.workers.machineDeployments[2].name")]
    assert errs[0].body() == 'Invalid value: "x": MachineDeploymentClass with name "x" does not exist in ' \
                             'ClusterClass "cc"'


def test_versions_health_checks_and_autoscaler_annotations_of_the_class() -> None:
    cc = _with_workers(klass())
    cc["spec"]["kubernetesVersions"] = ["v1.34.0"]
    c = cluster()
    c["spec"]["topology"]["controlPlane"] = {"healthCheck": {"checks": {"nodeStartupTimeoutSeconds": 60}}}
    c["spec"]["topology"]["workers"] = {"machineDeployments": [
        {"name": "md", "class": "w", "replicas": 2, "healthCheck": {"enabled": True}}]}
    errs = validate_cluster_for_class(c, None, cc)
    assert [(e.type, e.field) for e in errs] == [
        (fielderrors.INVALID, "spec.topology.version"),
        (fielderrors.FORBIDDEN, "spec.topology.controlPlane.healthCheck"),
        (fielderrors.FORBIDDEN, "spec.topology.workers.machineDeployments[md].healthCheck.enable"),
        (fielderrors.INVALID, "spec.topology.workers.machineDeployments[md].replicas")]


def test_without_its_class_a_new_cluster_passes_and_an_update_does_not() -> None:
    c = cluster()
    c["metadata"]["namespace"] = "ns"
    assert validate_cluster_for_class(c, None, None) == []
    errs = validate_cluster_for_class(c, c, None)
    assert [(e.type, e.field, e.detail) for e in errs] == [
        (fielderrors.INTERNAL, "spec.topology.class", "ClusterClass ns/cc not found")]


def test_clusterclass_variables_are_refused_as_upstreams_clusterclass_webhook_does() -> None:
    s = {"openAPIV3Schema": {"type": "string"}}
    cc = {"metadata": {"name": "cc"}, "spec": {"variables": [
        {"name": "a", "required": True, "schema": s}, {"name": "a", "required": False, "schema": s},
        {"name": "b", "required": False, "schema": {"openAPIV3Schema": {"type": "integer", "default": "x"}}}]}}
    errs = validate_clusterclass(cc, None)
    assert [(e.type, e.field) for e in errs] == [
        (fielderrors.INVALID, "spec.variables[a].name"),
        (fielderrors.INVALID, "spec.variables[b].schema.openAPIV3Schema.default")], [str(e) for e in errs]
    assert validate_clusterclass({"metadata": {"name": "cc"}, "spec": {}}, None) == []


def test_a_list_naming_an_undefined_variable_is_not_defaulted() -> None:
    """Upstream's DefaultClusterVariables fails for the whole list when a value names no definition, so nothing of
    it is defaulted and validation sees it as given: a required variable the list lacks is reported too (the
    admission oracle's #204, a renamed variable)."""
    cc = klass()
    cc["status"]["variables"][1]["definitions"][0]["required"] = True
    cc["status"]["variables"][1]["required"] = True
    out, errs = default_and_validate_variables(cluster([{"name": "nope", "value": 1}]), None, cc)
    assert out["spec"]["topology"]["variables"] == [{"name": "nope", "value": 1}]
    assert sorted(e.field for e in errs) == ["spec.topology.variables", "spec.topology.variables[nope]"]
    out, errs = default_and_validate_variables(cluster([]), None, cc)
    assert errs == [] and [v["name"] for v in out["spec"]["topology"]["variables"]] == ["shape", "image"]


def _at(version: str) -> dict[str, Any]:
    c = cluster()
    c["spec"]["topology"]["version"] = version
    return c


def _version_errors(old: str, new: str, cc: dict[str, Any] | None = None, state: UpgradeState | None = None,
                    annotations: dict[str, str] | None = None) -> list[str]:
    c = _at(new)
    c["metadata"]["annotations"] = annotations or {}
    return [e.body() for e in validate_cluster_for_class(c, _at(old), cc or klass(), state)
            if e.field == "spec.topology.version"]


def _cp(spec: str, status: str | None) -> dict[str, Any]:
    return {"spec": {"version": spec}, "status": {"version": status} if status else {}}


def _md(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {
        "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": name}},
        "template": {"spec": {"version": version}}}}


def _machine(md: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{md}-m", "namespace": "ns", "labels": {"cluster.x-k8s.io/deployment-name": md}},
            "spec": {"version": version}}


def test_a_topology_version_update_as_upstreams_validate_topology_version_update() -> None:
    """upstream internal/webhooks/cluster.go validateTopologyVersionUpdate, its messages; the first reason only."""
    ok = UpgradeState(control_plane=_cp("v1.35.0", "v1.35.0"))
    assert _version_errors("v1.35.0", "v1.35.0") == []
    assert _version_errors("v1.35.0", "v1.34.4", state=ok) == [
        'Invalid value: "v1.34.4": version cannot be decreased from "1.35.0" to "1.34.4"']
    assert _version_errors("v1.35.0", "v1.37.0", state=ok) == [
        'Invalid value: "v1.37.0": version cannot be increased from "1.35.0" to "1.37.0"']
    assert _version_errors("v1.35.0", "v1.36.9", state=ok) == []
    # a class with its Kubernetes versions (chained upgrades) or an upgrade-plan extension: no ceiling
    chained = klass()
    chained["spec"]["upgrade"] = {"external": {"generateUpgradePlanExtension": "plan"}}
    assert _version_errors("v1.35.0", "v1.37.0", cc=chained, state=ok) == []
    # the previous upgrade's AfterClusterUpgrade hook still pending
    pending = {"runtime.cluster.x-k8s.io/pending-hooks": "AfterClusterUpgrade,AfterWorkersUpgrade"}
    assert _version_errors("v1.35.0", "v1.36.0", annotations=pending) == [
        'Invalid value: "v1.36.0": version cannot be changed when the "AfterClusterUpgrade" hook is still blocking']
    # the control plane and the workers as they are
    assert _version_errors("v1.35.0", "v1.36.0", state=UpgradeState(control_plane=_cp("v1.35.0", None))) == [
        'Invalid value: "v1.36.0": version cannot be changed: control plane is currently provisioning']
    assert _version_errors("v1.35.0", "v1.36.0", state=UpgradeState(control_plane=_cp("v1.35.0", "v1.34.4"))) == [
        'Invalid value: "v1.36.0": version cannot be changed: control plane is still completing a previous upgrade']
    behind = UpgradeState(control_plane=_cp("v1.34.4", "v1.34.4"),
                          machine_deployments=(_md("md-a", "v1.35.0"), _md("md-b", "v1.34.4")),
                          machines=(_machine("md-a", "v1.34.4"),))
    assert _version_errors("v1.35.0", "v1.36.0", state=behind) == [
        'Invalid value: "v1.36.0": version cannot be changed: [Cluster.spec.topology.version 1.35.0 was not '
        "propagated to control plane yet (control plane version 1.34.4), there are still MachineDeployments "
        "completing a previous upgrade: [md-a, md-b]]"]
    settled = UpgradeState(control_plane=_cp("v1.35.0", "v1.35.0"), machine_deployments=(_md("md-a", "v1.35.0"),),
                           machines=(_machine("md-a", "v1.35.0"),))
    assert _version_errors("v1.35.0", "v1.36.0", state=settled) == []
    # upstream's unsafe annotation skips all of it
    assert _version_errors("v1.35.0", "v1.34.0", state=behind, annotations={
        "unsafe.topology.cluster.x-k8s.io/disable-update-version-check": ""}) == []
