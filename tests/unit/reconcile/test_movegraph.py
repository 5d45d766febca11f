"""The move object graph: what moves (ownership, soft ownership, secrets), in which order, and the objects
written at the target."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.labels import CLUSTER_NAME, PAUSED_ANNOTATION
from capd_py.reconcile import movegraph, servingcert
from capd_py.reconcile.movegraph import Graph

pytestmark = pytest.mark.unit

NS = "ns"
CAPI = "cluster.x-k8s.io/v1beta2"
INFRA = "infrastructure.cluster.x-k8s.io/v1beta2"


def obj(kind: str, name: str, uid: str, api: str = CAPI, owners: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
        controller: str = "", labels: dict[str, str] | None = None, **top: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "42",
                          "creationTimestamp": "2026-01-01T00:00:00Z", "generation": 3}
    if owners:
        md["ownerReferences"] = [{"apiVersion": CAPI, "kind": k, "name": n, "uid": u,
                                  **({"controller": True, "blockOwnerDeletion": True} if u == controller else {})}
                                 for k, n, u in owners]
    if labels:
        md["labels"] = labels
    return {"apiVersion": api, "kind": kind, "metadata": md, **top}


CLUSTER = ("Cluster", "c1", "u-cluster")
KCP = ("KubeadmControlPlane", "c1-cp", "u-kcp")
MACHINE = ("Machine", "c1-cp-a", "u-m")
KC = ("KubeadmConfig", "c1-cp-a", "u-kc")
CRS = ("ClusterResourceSet", "c1-crs-0", "u-crs")
CC = ("ClusterClass", "quick-start", "u-cc")
LBL = {CLUSTER_NAME: "c1"}


def objects() -> list[dict[str, Any]]:
    ready = {"initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True}}
    return [
        obj(*CLUSTER, spec={"controlPlaneRef": {"name": "c1-cp"}}, status=ready),
        obj("DockerCluster", "c1", "u-dc", INFRA, owners=[CLUSTER], controller="u-cluster", labels=LBL),
        obj(*KCP, api="controlplane.cluster.x-k8s.io/v1beta2", owners=[CLUSTER], controller="u-cluster",
            labels=LBL),
        # a template whose owner reference no controller has set yet: the cluster-name label links it
        obj("DockerMachineTemplate", "c1-cp", "u-dmt", INFRA, labels=LBL),
        obj(*MACHINE, owners=[KCP], controller="u-kcp", labels=LBL, status={"nodeRef": {"name": "n1"}}),
        obj(*KC, api="bootstrap.cluster.x-k8s.io/v1beta2", owners=[KCP, MACHINE], controller="u-m",
            labels=LBL, status={"dataSecretName": "c1-cp-a"}),
        obj("DockerMachine", "c1-cp-a", "u-dm", INFRA, owners=[MACHINE], controller="u-m", labels=LBL,
            status={"initialization": {"provisioned": True}}),
        obj("Secret", "c1-cp-a", "u-data", "v1", owners=[KC], controller="u-kc"),
        obj("Secret", "c1-ca", "u-ca", "v1", owners=[KCP], controller="u-kcp"),
        obj("Secret", "c1-sa", "u-sa", "v1"),                                  # no owner: named after the Cluster
        obj("Secret", "c1-apiserver-etcd-client", "u-aec", "v1"),
        obj("Secret", "c2-ca", "u-c2ca", "v1"),                                # another (absent) cluster's
        obj("Secret", "unrelated", "u-other", "v1"),
        obj("Secret", "c1-notapurpose", "u-np", "v1"),
        obj(*CRS, api="addons.cluster.x-k8s.io/v1beta2",
            spec={"resources": [{"kind": "ConfigMap", "name": "cni"}, {"kind": "Secret", "name": "crs-secret"}]}),
        obj("ConfigMap", "cni", "u-cni", "v1"),
        obj("Secret", "crs-secret", "u-crs-secret", "v1"),
        obj("ClusterResourceSetBinding", "c1", "u-bind", "addons.cluster.x-k8s.io/v1beta2", owners=[CRS],
            spec={"clusterName": "c1"}),
        obj("ConfigMap", "kube-root-ca.crt", "u-root", "v1"),
        # a ClusterClass, its templates, and a Cluster using it
        obj(*CC, spec={"infrastructure": {"templateRef": {"apiVersion": INFRA, "kind": "DockerClusterTemplate",
                                                          "name": "qs-cluster"}}}),
        obj("DockerClusterTemplate", "qs-cluster", "u-dct", INFRA),
        obj("Cluster", "c3", "u-c3", spec={"topology": {"classRef": {"name": "quick-start"}}}, status=ready),
    ]


def names(nodes: list[movegraph.Node]) -> set[str]:
    return {f"{n.kind}/{n.name}" for n in nodes}


def test_move_set_follows_ownership_and_soft_ownership() -> None:
    g = Graph(objects())
    moved = names(g.move_nodes())
    assert {"Cluster/c1", "DockerCluster/c1", "KubeadmControlPlane/c1-cp", "DockerMachineTemplate/c1-cp",
            "Machine/c1-cp-a", "KubeadmConfig/c1-cp-a", "DockerMachine/c1-cp-a",
            "Secret/c1-cp-a", "Secret/c1-ca", "Secret/c1-sa", "Secret/c1-apiserver-etcd-client",
            "ClusterResourceSet/c1-crs-0", "ConfigMap/cni", "Secret/crs-secret", "ClusterResourceSetBinding/c1",
            "ClusterClass/quick-start", "DockerClusterTemplate/qs-cluster", "Cluster/c3"} == moved
    # what belongs to no cluster, class or resource set stays
    assert not moved & {"Secret/c2-ca", "Secret/unrelated", "Secret/c1-notapurpose", "ConfigMap/kube-root-ca.crt"}


def test_unowned_templates_belong_to_what_references_them() -> None:
    ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "cp"}
    kcp = obj(*KCP, owners=[CLUSTER], spec={"machineTemplate": {"spec": {"infrastructureRef": ref}}})
    md = obj("MachineDeployment", "md", "u-md", owners=[CLUSTER], spec={"template": {"spec": {
        "bootstrap": {"configRef": {"kind": "KubeadmConfigTemplate", "name": "md"}},
        "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "md"}}}})
    owned = obj("DockerMachineTemplate", "md", "u-dmt-md", INFRA, owners=[CLUSTER])
    g = Graph([obj(*CLUSTER), kcp, md, owned, obj("DockerMachineTemplate", "cp", "u-dmt-cp", INFRA),
               obj("KubeadmConfigTemplate", "md", "u-kct", "bootstrap.cluster.x-k8s.io/v1beta2")])
    assert g.nodes["u-dmt-cp"].soft_owners == {"u-kcp"}
    assert g.nodes["u-kct"].soft_owners == {"u-md"}
    assert g.nodes["u-dmt-md"].soft_owners == set()  # it has an owner reference already
    assert len(g.move_nodes()) == 6


def test_unowned_objects_belong_to_the_cluster_they_name() -> None:
    mhc = obj("MachineHealthCheck", "mhc", "u-mhc", spec={"clusterName": "c1"})
    other = obj("MachineHealthCheck", "mhc2", "u-mhc2", spec={"clusterName": "elsewhere"})
    g = Graph([obj(*CLUSTER), mhc, other, obj("ConfigMap", "x", "u-x", "v1", labels=LBL)])
    assert names(g.move_nodes()) == {"Cluster/c1", "MachineHealthCheck/mhc", "ConfigMap/x"}


def test_soft_owners() -> None:
    g = Graph(objects())
    assert g.find("Secret", NS, "c1-sa").soft_owners == {"u-cluster"}  # type: ignore[union-attr]
    assert g.find("Cluster", NS, "c3").soft_owners == {"u-cc"}  # type: ignore[union-attr]
    assert g.find("ClusterResourceSetBinding", NS, "c1").all_owners() == {"u-crs", "u-cluster"}  # type: ignore[union-attr]
    assert g.find("ConfigMap", NS, "cni").soft_owners == {"u-crs"}  # type: ignore[union-attr]
    assert g.find("DockerClusterTemplate", NS, "qs-cluster").soft_owners == {"u-cc"}  # type: ignore[union-attr]
    # a secret with an owner reference is not also claimed by name
    assert g.find("Secret", NS, "c1-ca").soft_owners == set()  # type: ignore[union-attr]


@pytest.mark.parametrize("name,cluster", [("c1-kubeconfig", "c1"), ("my-cluster-ca", "my-cluster"),
                                          ("c1-apiserver-etcd-client", "c1"), ("c1-etcd", "c1"),
                                          ("c1-proxy", "c1"), ("c1-sa", "c1"), ("ca", None), ("-ca", None),
                                          ("c1-md-0-abc", None)])
def test_secret_cluster_name(name: str, cluster: str | None) -> None:
    assert movegraph.secret_cluster_name(name) == cluster


def test_sequence_creates_owners_first_and_everything_once() -> None:
    g = Graph(objects())
    seq = g.sequence()
    position = {n.uid: i for i, group in enumerate(seq) for n in group}
    assert sorted(position) == sorted(n.uid for n in g.move_nodes())
    for n in g.move_nodes():
        for o in n.all_owners():
            assert position[o] < position[n.uid], (n.identity, g.nodes[o].identity)
    # roots first; the bootstrap data secret after its KubeadmConfig, which waits for the Machine
    assert names(seq[0]) == {"Cluster/c1", "ClusterResourceSet/c1-crs-0", "ClusterClass/quick-start"}
    assert position["u-data"] > position["u-kc"] > position["u-m"] > position["u-kcp"]


def test_ownership_cycle_is_still_moved_once() -> None:
    a = obj("Cluster", "c1", "u-a", status={})
    b = obj("Secret", "x", "u-b", "v1", owners=[("Secret", "y", "u-c")])
    c = obj("Secret", "y", "u-c", "v1", owners=[("Secret", "x", "u-b"), ("Cluster", "c1", "u-a")])
    g = Graph([a, b, c])
    seq = g.sequence()
    assert [names(s) for s in seq] == [{"Cluster/c1"}, {"Secret/x", "Secret/y"}]


def test_owner_references_get_the_new_uids_and_lose_owners_that_do_not_move() -> None:
    dm = obj("DockerMachine", "m", "u-dm", INFRA, owners=[MACHINE, ("Gone", "g", "u-gone")], controller="u-m")
    g = Graph([obj(*MACHINE), dm])
    refs = movegraph.owner_references(g.nodes["u-dm"], {"u-m": "new-m"})
    assert refs == [{"apiVersion": CAPI, "kind": "Machine", "name": "c1-cp-a", "uid": "new-m", "controller": True,
                     "blockOwnerDeletion": True}]


def test_target_object_drops_server_metadata_and_status() -> None:
    src = obj(*KC, owners=[MACHINE], status={"dataSecretName": "x"}, spec={"a": 1})
    src["metadata"].update(generateName="c1-cp-", finalizers=["f"], annotations={"a": "b"})
    out = movegraph.target_object(src, [{"uid": "new"}])
    assert out == {"apiVersion": CAPI, "kind": "KubeadmConfig", "spec": {"a": 1},
                   "metadata": {"name": "c1-cp-a", "namespace": NS, "finalizers": ["f"], "annotations": {"a": "b"},
                                "ownerReferences": [{"uid": "new"}]}}
    assert src["metadata"]["uid"] == "u-kc" and src["status"]  # the source object is left alone


def test_not_ready_and_already_paused() -> None:
    objs = [obj("Cluster", "new", "u-new", status={}),
            obj("Cluster", "noncp", "u-2", spec={"controlPlaneRef": {"name": "x"}, "paused": True},
                status={"initialization": {"infrastructureProvisioned": True}}),
            obj("Machine", "m", "u-m", owners=[("Cluster", "new", "u-new")]),
            obj("ClusterClass", "cc", "u-cc")]
    objs[3]["metadata"]["annotations"] = {PAUSED_ANNOTATION: ""}
    g = Graph(objs)
    assert g.not_ready() == ["Cluster ns/new: infrastructure is not provisioned yet",
                             "Cluster ns/noncp: control plane is not initialized yet",
                             "Machine ns/m: no node yet (status.nodeRef)"]
    assert sorted(g.already_paused()) == ["Cluster ns/noncp", "ClusterClass ns/cc"]
    assert Graph(objects()).not_ready() == [] and Graph(objects()).already_paused() == []


def test_pause_patches() -> None:
    assert movegraph.pause_patch("Cluster", True) == {"spec": {"paused": True}}
    assert movegraph.pause_patch("Cluster", False) == {"spec": {"paused": None}}
    assert movegraph.pause_patch("ClusterClass", True) == {"metadata": {"annotations": {PAUSED_ANNOTATION: "true"}}}
    assert movegraph.pause_patch("ClusterResourceSet", False) == {
        "metadata": {"annotations": {PAUSED_ANNOTATION: None}}}
    assert movegraph.paused({"kind": "Cluster", "metadata": {}, "spec": {"paused": True}})
    assert not movegraph.paused({"kind": "ClusterClass", "metadata": {}})


def test_tree_lists_every_moved_object_once_under_its_controller() -> None:
    lines = Graph(objects()).tree()
    text = "\n".join(lines)
    assert len(lines) == len(Graph(objects()).move_nodes())
    assert lines[0] == "ClusterClass/quick-start"
    assert "Cluster/c1" in lines
    assert "│   │   ├── KubeadmConfig/c1-cp-a  (also owned by KubeadmControlPlane/c1-cp)" in text
    assert "├── DockerMachineTemplate/c1-cp\n" in text
    assert "ClusterResourceSetBinding/c1  (also owned by Cluster/c1)" in text
    assert "Secret/unrelated" not in text


def test_the_conversion_webhook_secret_never_moves() -> None:
    """Per management cluster: the target keeps its own (capd-py init made it), even if its namespace moved."""
    g = Graph([*objects(), obj("Secret", servingcert.SECRET_NAME, "u-webhook", "v1",
                               labels={"app.kubernetes.io/part-of": "capd-py"})])
    assert f"Secret/{servingcert.SECRET_NAME}" not in names(g.move_nodes())


def test_cluster_nodes_and_outside_owners() -> None:
    """What a snapshot keeps of one cluster: its tenant tree only (not another cluster's, not the
    ClusterResourceSet, ClusterClass or unrelated objects), and the owners outside it a restore links by name."""
    g = Graph(objects())
    kept = g.cluster_nodes(NS, "c1")
    assert names(kept) == {"Cluster/c1", "DockerCluster/c1", "KubeadmControlPlane/c1-cp",
                           "DockerMachineTemplate/c1-cp", "Machine/c1-cp-a", "KubeadmConfig/c1-cp-a",
                           "DockerMachine/c1-cp-a", "Secret/c1-cp-a", "Secret/c1-ca", "Secret/c1-sa",
                           "Secret/c1-apiserver-etcd-client", "ClusterResourceSetBinding/c1"}
    assert g.cluster_nodes(NS, "nope") == []
    alone = Graph([n.obj for n in kept])
    assert [(ns, r["kind"], r["name"], r["uid"]) for ns, r in alone.outside_owners()] == [
        (NS, "ClusterResourceSet", "c1-crs-0", "u-crs")]
    assert names([n for grp in alone.sequence() for n in grp]) == names(kept)  # the Cluster is the root again
