"""Upstream v1.13's KubeadmControlPlane / KubeadmConfig webhooks, rule by rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api.admission import kubeadm

pytestmark = pytest.mark.unit

REF = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "t"}
EXTERNAL = {"endpoints": ["https://e:2379"], "caFile": "a", "certFile": "b", "keyFile": "c"}


def kcp(**spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"name": "cp"}, "spec": {
        "replicas": 1, "version": "v1.34.4", "machineTemplate": {"spec": {"infrastructureRef": REF}}}}
    out["spec"].update(spec)
    return out


def fields(errors: list[Any]) -> list[str]:
    return [e.field for e in errors]


def test_defaults() -> None:
    got = kubeadm.default_kubeadmcontrolplane({"spec": {"version": "1.34.4"}})
    assert got["spec"] == {"version": "v1.34.4", "replicas": 1, "rollout": {"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    kept = kubeadm.default_kubeadmcontrolplane(kcp(rollout={"strategy": {"rollingUpdate": {"maxSurge": 0}}}))
    assert kept["spec"]["rollout"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}


@pytest.mark.parametrize(("replicas", "etcd", "refused"), [
    (1, None, False), (2, None, True), (3, {"local": {"dataDir": "/x"}}, False),
    (4, {"local": {"dataDir": "/x"}}, True),
    (2, {"external": EXTERNAL}, False),
])
def test_odd_replicas_with_stacked_etcd(replicas: int, etcd: dict[str, Any] | None, refused: bool) -> None:
    spec: dict[str, Any] = {"replicas": replicas}
    if etcd is not None:
        spec["kubeadmConfigSpec"] = {"clusterConfiguration": {"etcd": etcd}}
    errs = kubeadm.validate_kubeadmcontrolplane(None, kcp(**spec))
    assert (errs == [kubeadm.forbidden("spec.replicas", "cannot be an even number when etcd is stacked")]) is refused
    assert bool(errs) is refused


def test_scale_subresource() -> None:
    assert kubeadm.scale_denial(kcp(), 2) == "replicas cannot be an even number when etcd is stacked"
    assert kubeadm.scale_denial(kcp(), 0) == "replicas cannot be 0"
    assert kubeadm.scale_denial(kcp(), 3) is None
    external = kcp(kubeadmConfigSpec={"clusterConfiguration": {"etcd": {"external": EXTERNAL}}})
    assert kubeadm.scale_denial(external, 2) is None


@pytest.mark.parametrize(("change", "field"), [
    ({"kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/x"}}},
     "spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir"),
    ({"kubeadmConfigSpec": {"clusterConfiguration": {"controlPlaneEndpoint": {"host": "h", "port": 1}}}},
     "spec.kubeadmConfigSpec.clusterConfiguration.controlPlaneEndpoint"),
    ({"kubeadmConfigSpec": {"initConfiguration": {"nodeRegistration": {"name": "x"}}, "joinConfiguration": {
        "discovery": {"bootstrapToken": {"token": "x"}}}}}, None),
    ({"kubeadmConfigSpec": {"preKubeadmCommands": ["x"], "files": [{"path": "/a", "content": "b"}]}}, None),
    ({"kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"certSANs": ["x"]}}}}, None),
    ({"machineTemplate": {"spec": {"infrastructureRef": {**REF, "name": "t2"}}}}, None),
    ({"replicas": 3, "version": "v1.35.0"}, None),
    ({"version": "v1.36.0"}, "spec.version"),
    ({"version": "v1.33.0"}, None),
])
def test_updates(change: dict[str, Any], field: str | None) -> None:
    old = kcp()
    new = copy.deepcopy(old)
    new["spec"].update(change)
    errs = kubeadm.validate_kubeadmcontrolplane(old, new)
    assert all(f.startswith(field) for f in fields(errs)) if field else not errs
    assert errs or field is None


def test_update_messages() -> None:
    old, new = kcp(), kcp(version="v1.36.1")
    assert str(kubeadm.validate_kubeadmcontrolplane(old, new)[0]) == (
        "spec.version: Forbidden: cannot update Kubernetes version from v1.34.4 to v1.36.1")
    new = kcp(kubeadmConfigSpec={"clusterConfiguration": {"certificatesDir": "/x"}})
    assert str(kubeadm.validate_kubeadmcontrolplane(old, new)[0]) == (
        "spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir: Forbidden: cannot be modified")


def test_empty_objects_are_no_change() -> None:
    """Go marshals empty structs away (omitempty/omitzero): `{}` where there was nothing is not a modification."""
    new = kcp(kubeadmConfigSpec={"clusterConfiguration": {}})
    assert not kubeadm.validate_kubeadmcontrolplane(kcp(), new)
    assert not kubeadm.validate_kubeadmcontrolplane(kcp(), {**kcp(), "status": {"replicas": 3}})


def test_etcd_and_dns() -> None:
    both = kcp(kubeadmConfigSpec={"clusterConfiguration": {"etcd": {"local": {"dataDir": "/x"}, "external": EXTERNAL}}})
    assert "spec.kubeadmConfigSpec.clusterConfiguration.etcd.local" in fields(
        kubeadm.validate_kubeadmcontrolplane(None, both))
    old = kcp(kubeadmConfigSpec={"clusterConfiguration": {"etcd": {"local": {"dataDir": "/x"}}}})
    new = kcp(kubeadmConfigSpec={"clusterConfiguration": {"etcd": {"external": EXTERNAL}}})
    assert fields(kubeadm.validate_kubeadmcontrolplane(old, new)) == [
        "spec.kubeadmConfigSpec.clusterConfiguration.etcd.external"]
    bad_tag = kcp(kubeadmConfigSpec={"clusterConfiguration": {"dns": {"imageTag": "v1.11.1:x"}}})
    assert "spec.kubeadmConfigSpec.clusterConfiguration.dns.imageTag" in fields(
        kubeadm.validate_kubeadmcontrolplane(None, bad_tag))


def test_rollout_and_certificate_validity() -> None:
    assert fields(kubeadm.validate_kubeadmcontrolplane(None, kcp(rollout={"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}}))) == ["spec.rollout.strategy.rollingUpdate"]
    assert not kubeadm.validate_kubeadmcontrolplane(None, kcp(replicas=3, rollout={"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}}))
    assert fields(kubeadm.validate_kubeadmcontrolplane(None, kcp(rollout={"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}}))) == [
        "spec.rollout.strategy.rollingUpdate.maxSurge"]
    # upstream's e2e kcp-scale-in flavor renders `maxSurge: 0"` (a string): IntValue() 0, allowed with 3 replicas
    assert not kubeadm.validate_kubeadmcontrolplane(None, kcp(replicas=3, rollout={"strategy": {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": '0"'}}}))
    days = "spec.kubeadmConfigSpec.clusterConfiguration.certificateValidityPeriodDays"
    assert fields(kubeadm.validate_kubeadmcontrolplane(None, kcp(kubeadmConfigSpec={"clusterConfiguration": {
        "certificateValidityPeriodDays": 4000}}))) == [days]
    assert fields(kubeadm.validate_kubeadmcontrolplane(None, kcp(
        kubeadmConfigSpec={"clusterConfiguration": {"certificateValidityPeriodDays": 100}},
        rollout={"before": {"certificatesExpiryDays": 100}}))) == ["spec.rollout.before.certificatesExpiryDays"]


def test_kubeadm_config_spec() -> None:
    spec = {"files": [{"path": "/a", "content": "x", "contentFrom": {"secret": {}}}, {"path": "/a", "content": "y"}],
            "users": [{"name": "u", "passwd": "p", "passwdFrom": {"secret": {"name": "s", "key": "k"}}}]}
    assert fields(kubeadm.validate_kubeadmconfig(None, {"spec": spec})) == [
        "spec.files[0]", "spec.files[0].contentFrom.secret.name", "spec.files[0].contentFrom.secret.key",
        "spec.files[1].path", "spec.users[0]"]
    assert fields(kubeadm.validate_kubeadmconfigtemplate(None, {"spec": {"template": {"spec": spec}}}))[0] == \
        "spec.template.spec.files[0]"
    assert not kubeadm.validate_kubeadmconfig(None, {"spec": {}})
    assert not kubeadm.validate_kubeadmconfig(None, {})
    # the template's metadata as upstream's ObjectMeta.Validate (the admission oracle's #576: a label value "a/b")
    meta = {"labels": {"ok": "a", "bad": "a/b"}, "annotations": {"-x": "v"}}
    assert fields(kubeadm.validate_kubeadmconfigtemplate(None, {"spec": {"template": {"metadata": meta}}})) == [
        "spec.template.metadata.labels", "spec.template.metadata.annotations"]
    timeouts = {"initConfiguration": {"timeouts": {"controlPlaneComponentHealthCheckSeconds": 60}}}
    assert not kubeadm.validate_kubeadmconfig(None, {"spec": timeouts})
    errs = kubeadm.validate_kubeadmcontrolplane(None, kcp(kubeadmConfigSpec=timeouts))
    assert str(errs[0]) == (
        'spec.kubeadmConfigSpec.initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds: Invalid value: '
        '"60": controlPlaneComponentHealthCheckSeconds must be set to the same value both in '
        "initConfiguration.timeouts (60) and in joinConfiguration.timeouts (unset)")


def test_merge_patch_paths() -> None:
    assert kubeadm.merge_patch_paths({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1, 2], "d": {"e": 1}}}) == [
        ("a", "b"), ("a", "c"), ("a", "d", "e")]
    assert kubeadm.merge_patch_paths({"a": {"b": 1}}, {}) == [("a",)]


def test_kcp_template() -> None:
    template: dict[str, Any]
    template = {"metadata": {"name": "t"}, "spec": {"template": {"spec": {"kubeadmConfigSpec": {
        "files": [{"path": "/a", "content": "x"}]}}}}}
    assert not kubeadm.validate_kubeadmcontrolplanetemplate(None, template)
    assert not kubeadm.validate_kubeadmcontrolplanetemplate(template, copy.deepcopy(template))
    changed = copy.deepcopy(template)
    changed["spec"]["template"]["spec"]["kubeadmConfigSpec"]["files"][0]["content"] = "y"
    errs = kubeadm.validate_kubeadmcontrolplanetemplate(template, changed)
    assert [e.field for e in errs] == ["spec.template.spec"]
    assert "spec.template.spec field is immutable" in str(errs[0])
    # metadata may change; an emptied default rollout strategy is no change
    relabelled = copy.deepcopy(template)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert not kubeadm.validate_kubeadmcontrolplanetemplate(template, relabelled)
    defaulted = copy.deepcopy(template)
    defaulted["spec"]["template"]["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate",
                                                                     "rollingUpdate": {"maxSurge": 1}}}
    assert not kubeadm.validate_kubeadmcontrolplanetemplate(defaulted, template)
    bad = copy.deepcopy(template)
    bad["spec"]["template"]["spec"]["rollout"] = {"strategy": {"type": "RollingUpdate",
                                                               "rollingUpdate": {"maxSurge": 2}}}
    bad["spec"]["template"]["spec"]["machineNaming"] = {"template": "x"}
    assert [e.field for e in kubeadm.validate_kubeadmcontrolplanetemplate(None, bad)] == [
        "spec.template.spec.rollout.strategy.rollingUpdate.maxSurge", "spec.template.spec.machineNaming.template"]


def test_ignition_needs_its_feature_gate_and_refuses_what_ignition_cannot_express() -> None:
    """KubeadmConfigSpec.validateIgnition (upstream's ignition e2e flavor runs with the gate on)."""
    spec: dict[str, Any] = {"format": "ignition", "ignition": {"containerLinuxConfig": {"strict": True}},
                            "files": [{"path": "/a", "content": "x", "encoding": "gzip"}], "bootCommands": ["x"],
                            "users": [{"name": "u", "inactive": True}],
                            "diskSetup": {"partitions": [{"device": "/dev/a", "layout": True, "tableType": "mbr",
                                                          "diskLayout": [{"percentage": 60}, {"percentage": 50}]}]}}
    off = kubeadm.kubeadm_config_spec_errors(spec, "spec", is_kcp=False, gates={})
    assert [(e.type, e.field) for e in off] == [
        ("FieldValueForbidden", "spec.format"), ("FieldValueForbidden", "spec.ignition"),
        ("FieldValueInvalid", "spec.diskSetup.partitions[0].diskLayout")]
    assert off[0].detail == "can be set only if the KubeadmBootstrapFormatIgnition feature gate is enabled"
    on = kubeadm.kubeadm_config_spec_errors(spec, "spec", is_kcp=False, gates={"KubeadmBootstrapFormatIgnition": True})
    assert [e.field for e in on] == ["spec.users[0].inactive", "spec.files[0].encoding", "spec.bootCommands",
                                     "spec.diskSetup.partitions[0].tableType",
                                     "spec.diskSetup.partitions[0].diskLayout"]
    cloud_init = kubeadm.kubeadm_config_spec_errors({"ignition": {"containerLinuxConfig": {"strict": True}}}, "spec",
                                                    is_kcp=False, gates={"KubeadmBootstrapFormatIgnition": True})
    assert [(e.field, e.detail) for e in cloud_init] == [("spec.format", 'must be set to "ignition" if spec.ignition '
                                                                         'is set')]
