"""Upstream v1.13's core webhooks (internal/webhooks/*.go), rule by rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api.admission import core

pytestmark = pytest.mark.unit

REF = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "t"}


def md(name: str = "md-0", **spec: Any) -> dict[str, Any]:
    out: dict[str, Any]
    out = {"metadata": {"name": name}, "spec": {"clusterName": "c1", "template": {"spec": {
        "clusterName": "c1", "version": "v1.34.4", "bootstrap": {"dataSecretName": "s"}, "infrastructureRef": REF}}}}
    out["spec"].update(spec)
    return out


def fields(errors: list[core.FieldError]) -> list[str]:
    return [e.field for e in errors]


def test_machinedeployment_defaults_as_upstream() -> None:
    got = core.default_machinedeployment(md())
    assert got["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    assert got["spec"]["selector"] == {"matchLabels": {"cluster.x-k8s.io/deployment-name": "md-0",
                                                       "cluster.x-k8s.io/cluster-name": "c1"}}
    assert got["spec"]["template"]["metadata"]["labels"] == got["spec"]["selector"]["matchLabels"]
    assert got["spec"]["rollout"] == {"strategy": {"type": "RollingUpdate",
                                                   "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}
    assert got["spec"]["replicas"] == 1
    assert not core.validate_machinedeployment(None, got)


def test_defaulting_copies_and_is_idempotent() -> None:
    obj = md(template={"spec": {"clusterName": "c1", "version": "1.34.4", "bootstrap": {"dataSecretName": "s"},
                                "infrastructureRef": REF}})
    before = copy.deepcopy(obj)
    once = core.default_machinedeployment(obj)
    assert obj == before
    assert once["spec"]["template"]["spec"]["version"] == "v1.34.4"
    assert core.default_machinedeployment(once) == once


def test_a_given_selector_is_kept_and_gets_the_cluster_name() -> None:
    got = core.default_machinedeployment(md(selector={"matchLabels": {"app": "a"}},
                                            template={"metadata": {"labels": {"app": "a"}}, "spec": {}}))
    assert got["spec"]["selector"]["matchLabels"] == {"app": "a", "cluster.x-k8s.io/cluster-name": "c1"}
    expressions = core.default_machinedeployment(md(selector={"matchExpressions": [
        {"key": "app", "operator": "Exists"}]}))
    assert expressions["spec"]["selector"]["matchLabels"] == {"cluster.x-k8s.io/cluster-name": "c1"}


@pytest.mark.parametrize(("annotations", "old", "want"), [
    ({}, None, 1),
    ({core.AUTOSCALER_MIN_SIZE: "2", core.AUTOSCALER_MAX_SIZE: "5"}, None, 2),
    ({core.AUTOSCALER_MIN_SIZE: "2", core.AUTOSCALER_MAX_SIZE: "5"}, 4, 4),
    ({core.AUTOSCALER_MIN_SIZE: "2", core.AUTOSCALER_MAX_SIZE: "5"}, 9, 5),
    ({core.AUTOSCALER_MIN_SIZE: "2", core.AUTOSCALER_MAX_SIZE: "5"}, 1, 2),
])
def test_replicas_from_the_autoscaler_annotations(annotations: dict[str, str], old: int | None, want: int) -> None:
    obj = md()
    obj["metadata"]["annotations"] = annotations
    previous = None if old is None else {"spec": {"replicas": old}}
    assert core.default_machinedeployment(obj, previous)["spec"]["replicas"] == want


@pytest.mark.parametrize("default", [core.default_machineset, core.default_machinedeployment,
                                     core.default_machinepool])
def test_every_scalable_kind_defaults_replicas_from_the_autoscaler_range(default: Any) -> None:
    obj = md()
    obj["metadata"]["annotations"] = {core.AUTOSCALER_MIN_SIZE: "0", core.AUTOSCALER_MAX_SIZE: "3"}
    assert default(obj, None)["spec"]["replicas"] == 0  # create: the min size (scale from zero)
    assert default(obj, {"spec": {}})["spec"]["replicas"] == 0  # old one without replicas: min
    assert default(obj, {"spec": {"replicas": 2}})["spec"]["replicas"] == 2  # update: the old value kept
    obj["spec"]["replicas"] = 7
    assert default(obj, None)["spec"]["replicas"] == 7  # given replicas always win
    only_min = md()
    only_min["metadata"]["annotations"] = {core.AUTOSCALER_MIN_SIZE: "0"}
    assert default(only_min, None)["spec"]["replicas"] == 1  # one annotation alone: 1


@pytest.mark.parametrize(("value", "why"), [("x", "invalid syntax"), ("", "invalid syntax"), (" 1", "invalid syntax"),
                                            ("2147483648", "value out of range")])
def test_an_unparsable_autoscaler_annotation_is_refused_as_upstream(value: str, why: str) -> None:
    obj = md()
    obj["metadata"]["annotations"] = {core.AUTOSCALER_MIN_SIZE: value, core.AUTOSCALER_MAX_SIZE: "3"}
    with pytest.raises(core.DefaultingError) as e:
        core.default_machinedeployment(obj, None)
    assert str(e.value) == ('failed to caculate MachineDeployment replicas value: could not parse the value of the '
                            f'"{core.AUTOSCALER_MIN_SIZE}" annotation: strconv.ParseInt: parsing "{value}": {why}')
    obj["spec"]["replicas"] = 1  # replicas given: the annotations are not read
    assert core.default_machinedeployment(obj, None)["spec"]["replicas"] == 1


def test_machinedeployment_name_is_a_label_value() -> None:
    errs = core.validate_machinedeployment(None, md("a" * 64))
    assert str(errs[0]) == ('metadata.name: Invalid value: "' + "a" * 64 +
                            '": must be a valid label value: must be no more than 63 characters')
    assert not core.validate_machinedeployment(None, md("a" * 63))


@pytest.mark.parametrize(("spec", "field"), [
    ({"template": {"spec": {"clusterName": "c1", "infrastructureRef": REF}}}, "spec.template.spec.bootstrap"),
    ({"template": {"spec": {"clusterName": "c2", "bootstrap": {"dataSecretName": "s"}}}}, "spec.clusterName"),
    ({"template": {"spec": {"clusterName": "c1", "version": "v1.34", "bootstrap": {"dataSecretName": "s"}}}},
     "spec.template.spec.version"),
    ({"selector": {"matchLabels": {"a": "b"}}}, "spec.template.metadata.labels"),
    ({"rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}},
     "spec.rollout.strategy.rollingUpdate"),
    ({"rollout": {"strategy": {"rollingUpdate": {"maxSurge": "x"}}}}, "spec.rollout.strategy.rollingUpdate.maxSurge"),
    ({"remediation": {"maxInFlight": "x"}}, "spec.remediation.maxInFlight"),
    ({"machineNaming": {"template": "{{ .machineSet.name }}"}}, "spec.machineNaming.template"),
    ({"machineNaming": {"template": "{{ .nope }}-{{ .random }}"}}, "spec.machineNaming.template"),
    ({"machineNaming": {"template": "UPPER-{{ .random }}"}}, "spec.machineNaming.template"),
])
def test_machinedeployment_refusals(spec: dict[str, Any], field: str) -> None:
    assert field in fields(core.validate_machinedeployment(None, md(**spec)))


def test_selector_mismatch_message() -> None:
    errs = core.validate_machinedeployment(None, md(selector={"matchLabels": {"a": "b"}}))
    assert str(errs[0]) == 'spec.template.metadata.labels: Forbidden: must match spec.selector "a=b"'
    ms = core.validate_machineset(None, md(selector={"matchLabels": {"a": "b"}}))
    assert str(ms[0]).startswith("spec.template.metadata.labels: Invalid value: {}: must match spec.selector")


def test_cluster_name_is_immutable() -> None:
    old, new = md(), md()
    new["spec"]["clusterName"] = "c2"
    new["spec"]["template"]["spec"]["clusterName"] = "c2"
    for validate in (core.validate_machinedeployment, core.validate_machineset, core.validate_machinepool):
        assert "spec.clusterName" in fields(validate(old, new))
    assert fields(core.validate_machine({"spec": {"clusterName": "c1"}},
                                        {"spec": {"clusterName": "c2", "bootstrap": {"dataSecretName": "s"}}})) == [
        "spec.clusterName"]


def test_preflight_checks_to_skip_must_exist() -> None:
    obj = md()
    obj["metadata"]["annotations"] = {core.SKIP_PREFLIGHT_CHECKS: "KubeadmVersionSkew, All"}
    assert not core.validate_machinedeployment(None, obj)
    obj["metadata"]["annotations"] = {core.SKIP_PREFLIGHT_CHECKS: "KubeadmVersionSkew,Nope"}
    errs = core.validate_machinedeployment(None, obj)
    assert str(errs[0]) == ('metadata.annotations.machineset.cluster.x-k8s.io/skip-preflight-checks: Invalid value: '
                            '["Nope"]: skipped preflight check(s) must be among: [All ControlPlaneIsStable '
                            'ControlPlaneVersionSkew KubeadmVersionSkew KubernetesVersionSkew]')


def test_machineset_defaults_hash_a_long_name() -> None:
    got = core.default_machineset(md("a" * 64))
    assert got["spec"]["selector"] == {"matchLabels": {"cluster.x-k8s.io/set-name": "hash_2W8PhQ_z"}}
    assert got["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    assert not core.validate_machineset(None, got)


def test_machine_defaults_and_bootstrap() -> None:
    got = core.default_machine({"metadata": {"name": "m"}, "spec": {"clusterName": "c1", "version": "1.34.4"}})
    assert got == {"metadata": {"name": "m", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                   "spec": {"clusterName": "c1", "version": "v1.34.4", "deletion": {"nodeDeletionTimeoutSeconds": 10}}}
    # a value that is set stays, beside the other timeouts
    kept = core.default_machine({"spec": {"deletion": {"nodeDeletionTimeoutSeconds": 0, "nodeDrainTimeoutSeconds": 5}}})
    assert kept["spec"]["deletion"] == {"nodeDeletionTimeoutSeconds": 0, "nodeDrainTimeoutSeconds": 5}
    assert fields(core.validate_machine(None, got)) == ["spec.bootstrap"]
    got["metadata"]["labels"]["cluster.x-k8s.io/pool-name"] = "mp"  # a MachinePool's Machine
    assert not core.validate_machine(None, got)


def test_taints_need_the_gate_and_unreserved_keys() -> None:
    taints = [{"key": "node.kubernetes.io/x", "effect": "NoSchedule"}, {"key": "node-role.kubernetes.io/master"},
              {"key": "node.kubernetes.io/out-of-service"}, {"key": "bad key"}]
    off = core.machine_taint_errors(taints, "spec.taints")
    assert str(off[0]) == ("spec.taints: Forbidden: taints are not allowed to be set when the feature gate "
                           "MachineTaintPropagation is disabled")
    on = core.machine_taint_errors(taints, "spec.taints", propagation=True)
    assert fields(on) == ["spec.taints[0].key", "spec.taints[1].key", "spec.taints[3].key"]
    assert core._worker_taints([{"key": core.CONTROL_PLANE_TAINT}], "t", propagation=True)
    assert not core._worker_taints([{"key": core.CONTROL_PLANE_TAINT}], "t")


def test_machinepool() -> None:
    mp = {"metadata": {"name": "mp"}, "spec": {"clusterName": "c1", "template": {"spec": {
        "clusterName": "c1", "bootstrap": {"dataSecretName": "s"}}}}}
    got = core.default_machinepool(mp)
    assert got["spec"]["replicas"] == 1
    assert got["spec"]["template"]["spec"]["deletion"] == {"nodeDeletionTimeoutSeconds": 10}
    assert not core.validate_machinepool(None, got)
    got["spec"]["template"]["spec"]["taints"] = [{"key": "a"}]
    assert fields(core.validate_machinepool(None, got)) == ["spec.taints", "spec.taints"]


def test_machinehealthcheck() -> None:
    mhc = {"metadata": {"name": "mhc"}, "spec": {"clusterName": "c1", "selector": {"matchLabels": {"a": "b"}}}}
    got = core.default_machinehealthcheck(mhc)
    assert got["spec"]["checks"] == {"nodeStartupTimeoutSeconds": 600}
    assert got["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    assert not core.validate_machinehealthcheck(None, got)
    assert fields(core.validate_machinehealthcheck(None, {"spec": {"clusterName": "c1", "selector": {}}})) == [
        "spec.selector"]
    other = {"spec": {"clusterName": "c1", "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": "c2"}}}}
    assert fields(core.validate_machinehealthcheck(None, other)) == ["spec.selector"]
    slow: dict[str, Any]
    slow = {"spec": {"clusterName": "c1", "selector": {"matchLabels": {"a": "b"}},
                     "checks": {"nodeStartupTimeoutSeconds": 10}}}
    assert str(core.validate_machinehealthcheck(None, slow)[0]) == (
        "spec.checks.nodeStartupTimeoutSeconds: Invalid value: 10: must be at least 30s")
    slow["spec"]["checks"]["nodeStartupTimeoutSeconds"] = 0  # disabled
    assert not core.validate_machinehealthcheck(None, slow)


def test_cluster() -> None:
    ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c"}
    ok: dict[str, Any]
    ok = {"metadata": {"name": "c1"}, "spec": {"infrastructureRef": ref, "clusterNetwork": {
        "pods": {"cidrBlocks": ["192.168.0.0/16", "fd00::/48"]}}}}
    assert not core.validate_cluster(None, ok)
    bad = copy.deepcopy(ok)
    bad["metadata"]["name"] = "a" * 64
    bad["spec"]["clusterNetwork"]["services"] = {"cidrBlocks": ["10.0.0.0/33"]}
    assert fields(core.validate_cluster(None, bad)) == ["metadata.name", "spec.clusterNetwork.services.cidrBlocks[0]"]
    assert fields(core.validate_cluster(ok, {"metadata": {"name": "c1"}, "spec": {}})) == [
        "spec.infrastructureRef", "spec"]
    topo = {"metadata": {"name": "c1"}, "spec": {"topology": {"version": "1.34.4", "classRef": {"name": "cc"}}}}
    assert core.default_cluster(topo)["spec"]["topology"]["version"] == "v1.34.4"
    assert not core.validate_cluster(None, core.default_cluster(topo))
    assert fields(core.validate_cluster(topo, {"metadata": {"name": "c1"}, "spec": {"infrastructureRef": ref}})) == [
        "spec.topology"]


def test_docker_cluster_failure_domains_sorted() -> None:
    from capd_py.api.admission import docker

    ok = {"spec": {"failureDomains": [{"name": "a"}, {"name": "b"}]}}
    assert not docker.validate_dockercluster(None, ok)
    bad = {"spec": {"failureDomains": [{"name": "b"}, {"name": "a"}]}}
    assert [str(e) for e in docker.validate_dockercluster(None, bad)] == [
        'spec.failureDomains: Invalid value: [{"name":"b"},{"name":"a"}]: failure domains must be sorted by name']
    template = {"spec": {"template": {"metadata": {"labels": {"bad key": "x"}}, "spec": bad["spec"]}}}
    assert [e.field for e in docker.validate_dockerclustertemplate(None, template)] == [
        "spec.failureDomains", "spec.template.metadata.labels"]


def test_feature_gates_change_the_rules_as_upstreams() -> None:
    taint = [{"key": "a", "effect": "NoSchedule", "propagation": "Always"}]
    on = {"MachineTaintPropagation": True}
    assert [e.field for e in core.validate_machinedeployment(None, md(template={"spec": {
        "clusterName": "c1", "bootstrap": {"dataSecretName": "s"}, "taints": taint}}))] == ["spec.template.spec.taints"]
    assert not core.validate_machinedeployment(None, md(template={"spec": {
        "clusterName": "c1", "bootstrap": {"dataSecretName": "s"}, "taints": taint}}), on)
    cp_taint = {"key": core.CONTROL_PLANE_TAINT, "effect": "NoSchedule"}
    worker: dict[str, Any]
    worker = {"metadata": {"name": "m"}, "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "s"},
                                                  "taints": [cp_taint]}}
    assert [e.field for e in core.validate_machine(None, worker, on)] == ["spec.taints[0].key"]
    worker["metadata"]["labels"] = {"cluster.x-k8s.io/control-plane": ""}
    assert not core.validate_machine(None, worker, on)
    pool = {"metadata": {"name": "mp"}, "spec": {"clusterName": "c1", "template": {"spec": {
        "clusterName": "c1", "bootstrap": {"dataSecretName": "s"}}}}}
    assert str(core.validate_machinepool(None, pool, {"MachinePool": False})[0]) == (
        "spec: Forbidden: can be set only if the MachinePool feature flag is enabled")
    skipped = md()
    skipped["metadata"]["annotations"] = {core.SKIP_PREFLIGHT_CHECKS: "Nope"}
    assert core.validate_machinedeployment(None, skipped)
    assert not core.validate_machinedeployment(None, skipped, {"MachineSetPreflightChecks": False})


def test_a_clusterresourceset_strategy_defaults_to_apply_once_as_upstreams_webhook() -> None:
    from capd_py.api.admission.core import default_clusterresourceset
    assert default_clusterresourceset({"spec": {"strategy": ""}})["spec"]["strategy"] == "ApplyOnce"
    assert default_clusterresourceset({"spec": {"strategy": "Reconcile"}})["spec"]["strategy"] == "Reconcile"


def test_topology_metadata_labels_and_annotations_are_checked_as_upstream() -> None:
    """validateTopologyMetadata (upstream's differential found capd-py admitting these)."""
    from capd_py.api.admission.core import validate_cluster
    cluster = {"metadata": {"name": "c"}, "spec": {"topology": {
        "classRef": {"name": "cc"}, "version": "v1.35.0",
        "controlPlane": {"metadata": {"labels": {"ok": "10.0.0.0/8"}}},
        "workers": {"machineDeployments": [{"name": "md", "class": "w",
                                            "metadata": {"annotations": {"a/b/c": "x"}}}]}}}}
    errs = validate_cluster(None, cluster)
    assert [(e.type, e.field) for e in errs] == [
        ("FieldValueInvalid", "spec.topology.controlPlane.metadata.labels"),
        ("FieldValueInvalid", "spec.topology.workers.machineDeployments[md].metadata.annotations")]


def crs(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "crs"}, "spec": {"clusterSelector": {"matchLabels": {"cni": "ok"}},
                                                  "resources": [{"kind": "ConfigMap", "name": "cni"}], **spec}}


def test_clusterresourceset_as_upstreams_webhook() -> None:
    assert core.validate_clusterresourceset(None, crs()) == []
    assert core.default_clusterresourceset(crs())["spec"]["strategy"] == "ApplyOnce"
    # the selector parses (metav1.LabelSelectorAsSelector's words) and is not empty
    bad = core.validate_clusterresourceset(None, crs(clusterSelector={"matchLabels": {"cni": "-10%"}}))
    assert [(e.field, e.body()) for e in bad] == [(
        "spec.clusterSelector", 'Invalid value: {"matchLabels":{"cni":"-10%"}}: values[0][cni]: Invalid value: '
        '"-10%": a valid label must be an empty string or consist of alphanumeric characters, \'-\', \'_\' or \'.\', '
        "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
        "used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")]
    empties: list[dict[str, Any]] = [{}, {"matchLabels": None}, {"matchLabels": {}, "matchExpressions": []}]
    for empty in empties:
        errs = core.validate_clusterresourceset(None, crs(clusterSelector=empty))
        assert [(e.field, e.detail) for e in errs] == [("spec.clusterSelector", "selector must not be empty")]
    assert core.validate_clusterresourceset(None, crs(clusterSelector={"matchLabels": None, "matchExpressions": [
        {"key": "cni", "operator": "Exists"}]})) == []
    # clusterSelector and a set strategy are immutable; resources are not
    old = crs(strategy="ApplyOnce")
    assert fields(core.validate_clusterresourceset(old, crs(strategy="Reconcile"))) == ["spec.strategy"]
    assert fields(core.validate_clusterresourceset(old, crs(strategy="ApplyOnce", clusterSelector={
        "matchLabels": {"cni": "other"}}))) == ["spec.clusterSelector"]
    assert core.validate_clusterresourceset(old, crs(strategy="ApplyOnce", resources=[
        {"kind": "Secret", "name": "x"}])) == []
    assert core.validate_clusterresourceset(crs(), crs(strategy="Reconcile")) == []  # an unset strategy may be set


def test_topology_taints_as_upstreams_cluster_webhook() -> None:
    from capd_py.api import features
    taint = {"key": "a", "effect": "NoSchedule", "propagation": "Always"}
    cluster: dict[str, Any] = {"metadata": {"name": "c1"}, "spec": {"topology": {
        "classRef": {"name": "quick-start"}, "version": "v1.34.4", "controlPlane": {"taints": [taint]},
        "workers": {"machineDeployments": [{"name": "md-0", "class": "w", "taints": [taint]}],
                    "machinePools": [{"name": "mp-0", "class": "w"}]}}}}
    off = core.validate_cluster(None, cluster)
    assert [(e.field, e.detail) for e in off] == [
        ("spec.topology.controlPlane.taints", "taints are not allowed to be set when the feature gate "
                                              "MachineTaintPropagation is disabled"),
        ("spec.topology.workers.machineDeployments[md-0].taints", "taints are not allowed to be set when the feature "
                                                                  "gate MachineTaintPropagation is disabled")]
    assert core.validate_cluster(cluster, cluster) == off  # on an update too
    on = {features.MACHINE_TAINT_PROPAGATION: True}
    assert core.validate_cluster(None, cluster, on) == []
    cluster["spec"]["topology"]["workers"]["machinePools"][0]["taints"] = [{**taint, "key": "node.kubernetes.io/x"}]
    assert fields(core.validate_cluster(None, cluster, on)) == [
        "spec.topology.workers.machinePools[mp-0].taints[0].key"]


@pytest.mark.parametrize("template", [None, {}, {"spec": None}, {"spec": {}}])
def test_an_empty_template_spec_is_left_out_as_go_reencodes_it(template: Any) -> None:
    """MachineSpec is omitzero: upstream's defaulting answers without it and the API server says
    `spec.template.spec: Required value` (the admission oracle's #535, #912, #1023)."""
    for default in (core.default_machinedeployment, core.default_machineset):
        got = default({"metadata": {"name": "x"}, "spec": {"clusterName": "c1", "template": copy.deepcopy(template)}})
        assert "spec" not in got["spec"]["template"]
    got = core.default_machineset(md(template={"spec": {"version": "1.34.4"}}))
    assert got["spec"]["template"]["spec"] == {"version": "v1.34.4"}
