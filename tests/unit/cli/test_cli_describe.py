from __future__ import annotations

import datetime as dt

import pytest

from capd_py.cli.describe import Options, build_tree, conditions_filter, render, rows, shown_conditions, since

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def cond(t: str, status: str, reason: str, msg: str = "", ago: int = 60) -> dict:
    ts = (NOW - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": t, "status": status, "reason": reason, "message": msg, "lastTransitionTime": ts}


def obj(kind: str, name: str, labels: dict | None = None, spec: dict | None = None, status: dict | None = None,
        owner: dict | None = None) -> dict:
    md: dict = {"name": name, "namespace": "default", "labels": labels or {}}
    if owner:
        md["ownerReferences"] = [owner]
    return {"kind": kind, "metadata": md, "spec": spec or {}, "status": status or {}}


def objects() -> list[dict]:
    cl = obj("Cluster", "demo", spec={
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "demo"},
        "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                            "name": "demo-control-plane"}},
        status={"conditions": [cond("Available", "False", "NotAvailable", "* WorkersAvailable: 0 of 1\n* more",
                                    ago=30)],
                "controlPlane": {"desiredReplicas": 1, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                                 "upToDateReplicas": 1},
                "workers": {"desiredReplicas": 1, "replicas": 1, "readyReplicas": 0, "availableReplicas": 0,
                            "upToDateReplicas": 1}})
    dc = obj("DockerCluster", "demo", status={"conditions": [cond("Ready", "True", "Ready", ago=600)]})
    kcp = obj("KubeadmControlPlane", "demo-control-plane", spec={"replicas": 1},
              status={"replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "upToDateReplicas": 1,
                      "conditions": [cond("Available", "True", "Available", ago=300)]})
    m_cp = obj("Machine", "demo-control-plane-abcde",
               labels={"cluster.x-k8s.io/cluster-name": "demo", "cluster.x-k8s.io/control-plane": "",
                       "cluster.x-k8s.io/control-plane-name": "demo-control-plane"},
               status={"conditions": [cond("Ready", "True", "Ready", ago=200), cond("Available", "True", "Available"),
                                      cond("UpToDate", "True", "UpToDate")]})
    md = obj("MachineDeployment", "demo-md-0", spec={"replicas": 1},
             status={"replicas": 1, "readyReplicas": 0, "availableReplicas": 0, "upToDateReplicas": 1,
                     "conditions": [cond("Available", "False", "NotAvailable", "0 available", ago=100)]})
    m_w = obj("Machine", "demo-md-0-x-y", labels={"cluster.x-k8s.io/cluster-name": "demo",
                                                  "cluster.x-k8s.io/deployment-name": "demo-md-0"},
              status={"conditions": [cond("Ready", "False", "NodeNotReady", "Node is not ready", ago=5)]})
    orphan = obj("Machine", "lonely", labels={"cluster.x-k8s.io/cluster-name": "demo"})
    return [m_w, md, cl, kcp, dc, m_cp, orphan]


def test_tree_shape() -> None:
    root = build_tree(objects(), "demo")
    assert root.name == "Cluster/demo"
    assert [c.name for c in root.children] == ["ClusterInfrastructure - DockerCluster/demo",
                                               "ControlPlane - KubeadmControlPlane/demo-control-plane", "Workers"]
    cp = root.children[1]
    assert [c.name for c in cp.children] == ["Machine/demo-control-plane-abcde"]
    workers = root.children[2]
    assert [c.name for c in workers.children] == ["MachineDeployment/demo-md-0", "Machine/lonely"]
    assert [c.name for c in workers.children[0].children] == ["Machine/demo-md-0-x-y"]


def test_rows_and_columns() -> None:
    r = rows(build_tree(objects(), "demo"), NOW)
    names = [x[0] for x in r]
    assert names == [
        "Cluster/demo",
        "│ ",  # continuation of the multi-line message
        "├─ClusterInfrastructure - DockerCluster/demo",
        "├─ControlPlane - KubeadmControlPlane/demo-control-plane",
        "│ └─Machine/demo-control-plane-abcde",
        "└─Workers",
        "  ├─MachineDeployment/demo-md-0",
        "  │ └─Machine/demo-md-0-x-y",
        "  └─Machine/lonely",
    ]
    cluster = r[0]
    assert cluster[1:5] == ("2/2", "1", "1", "2")
    assert cluster[5:] == ("False", "NotAvailable", "30s", "* WorkersAvailable: 0 of 1")
    assert r[1][-1] == "* more"
    kcp = r[3]
    assert kcp[1:] == ("1/1", "1", "1", "1", "True", "Available", "5m", "")
    m = r[7]
    assert m[2:] == ("", "False", "", "False", "NodeNotReady", "5s", "Node is not ready")
    assert r[8][5:] == ("", "", "", "")  # no conditions yet


def test_render_header_alignment() -> None:
    text = render(build_tree(objects(), "demo"), NOW)
    lines = text.splitlines()
    assert lines[0].split() [:2] == ["NAME", "REPLICAS"]
    col = lines[0].index("REASON")
    assert lines[3][col:].startswith("Ready")  # DockerCluster row lines up under REASON


def test_missing_refs_and_unknown_cluster() -> None:
    cl = obj("Cluster", "c", spec={"infrastructureRef": {"apiGroup": "x", "kind": "DockerCluster", "name": "c"}})
    root = build_tree([cl], "c")
    assert root.children[0].name == "ClusterInfrastructure - DockerCluster/c"
    assert root.children[0].condition and root.children[0].condition["reason"] == "NotFound"
    with pytest.raises(ValueError):
        build_tree([cl], "other")


@pytest.mark.parametrize("ago,want", [(5, "5s"), (119, "119s"), (600, "10m"), (7200, "2h"), (3 * 86400, "3d")])
def test_since(ago: int, want: str) -> None:
    ts = (NOW - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert since(ts, NOW) == want
    assert since(None, NOW) == "" and since("garbage", NOW) == ""


def test_render_colour_only_when_asked() -> None:
    plain = render(build_tree(objects(), "demo"), NOW)
    assert "\x1b[" not in plain
    coloured = render(build_tree(objects(), "demo"), NOW, color=True)
    assert "\x1b[32mTrue" in coloured and "\x1b[31mFalse" in coloured  # STATUS green / red
    assert len(coloured.splitlines()) == len(plain.splitlines())


def test_machine_pools_under_workers_with_their_machines() -> None:
    mp = obj("MachinePool", "demo-mp-0", spec={"replicas": 2},
             status={"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "upToDateReplicas": 2,
                     "conditions": [cond("Available", "True", "Available", ago=10)]})
    owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool", "name": "demo-mp-0", "uid": "u",
             "controller": True}
    pool_m = obj("Machine", "demo-mp-0-abcde", labels={"cluster.x-k8s.io/cluster-name": "demo",
                                                       "cluster.x-k8s.io/pool-name": "demo-mp-0"}, owner=owner)
    root = build_tree([*objects(), mp, pool_m], "demo")
    workers = root.children[2]
    assert [c.name for c in workers.children] == ["MachineDeployment/demo-md-0", "MachinePool/demo-mp-0",
                                                  "Machine/lonely"]
    pool = workers.children[1]
    assert [c.name for c in pool.children] == ["Machine/demo-mp-0-abcde"]
    assert pool.counters == ("2/2", "1", "2", "2") and pool.condition is not None
    assert pool.condition["reason"] == "Available"


def _machine(name: str, ready: str = "True", reason: str = "Ready", owner_ms: str = "") -> dict:
    labels = {"cluster.x-k8s.io/cluster-name": "demo", "cluster.x-k8s.io/deployment-name": "demo-md-0"}
    owner = {"kind": "MachineSet", "name": owner_ms, "controller": True} if owner_ms else None
    return obj("Machine", name, labels=labels, owner=owner, status={"conditions": [
        cond("Ready", ready, reason), cond("Available", ready, "Available" if ready == "True" else "NotAvailable"),
        cond("UpToDate", "True", "UpToDate")]})


def test_grouping_merges_machines_with_the_same_conditions() -> None:
    objs = [o for o in objects() if o["metadata"]["name"] not in ("demo-md-0-x-y", "lonely")]
    objs += [_machine("demo-md-0-a"), _machine("demo-md-0-b"), _machine("demo-md-0-c"),
             _machine("demo-md-0-d", "False", "NodeNotReady")]
    md = build_tree(objs, "demo", Options()).children[2].children[0]
    assert [c.name for c in md.children] == ["Machine/demo-md-0-d", "3 Machines..."]
    group = md.children[1]
    assert group.counters == ("", "3", "3", "3")
    assert group.condition and group.condition["message"] == "See demo-md-0-a, demo-md-0-b, ..."
    assert group.condition["status"] == "True"
    # --no-grouping: one row each
    flat = build_tree(objs, "demo", Options(grouping=False)).children[2].children[0]
    assert len(flat.children) == 4
    # a Machine whose conditions are asked for stays on its own row
    one = build_tree(objs, "demo", Options(show_conditions="Machine/demo-md-0-a")).children[2].children[0]
    assert [c.name for c in one.children] == ["Machine/demo-md-0-a", "Machine/demo-md-0-d", "2 Machines..."]


def test_show_conditions_filters_and_rows() -> None:
    m = _machine("demo-md-0-a")
    m["status"]["conditions"] += [cond("Paused", "False", "NotPaused"), cond("Deleting", "True", "Drain", "draining")]
    assert conditions_filter(m, "all") == "all" and conditions_filter(m, "machine") == "all"
    assert conditions_filter(m, "Cluster,Machine/demo-md-0-a+") == "nonzero"
    assert conditions_filter(m, "Machine/other,KubeadmControlPlane") == ""
    # non-zero: Available/Ready always, Paused False is normal (negative polarity), Deleting True is not
    assert [c["type"] for c in shown_conditions(m, "Machine+")] == ["Ready", "Available", "Deleting"]
    assert len(shown_conditions(m, "all")) == 5
    objs = [o for o in objects() if o["metadata"]["name"] != "demo-md-0-x-y"] + [m]
    r = rows(build_tree(objs, "demo", Options(show_conditions="Machine/demo-md-0-a+")), NOW)
    names = [x[0] for x in r]
    i = next(k for k, n in enumerate(names) if n.endswith("Machine/demo-md-0-a"))
    assert names[i + 1].endswith("├─Ready") and names[i + 3].endswith("└─Deleting")
    assert r[i + 3][5:8] == ("True", "Drain", "60s") and r[i + 3][8] == "draining"
    assert render(build_tree(objs, "demo", Options(show_conditions="all")), NOW).count("UpToDate") >= 2


def test_show_machinesets_between_deployment_and_machines() -> None:
    ms = obj("MachineSet", "demo-md-0-abc", labels={"cluster.x-k8s.io/cluster-name": "demo",
                                                    "cluster.x-k8s.io/deployment-name": "demo-md-0"},
             spec={"replicas": 1}, status={"replicas": 1, "conditions": [cond("Ready", "True", "Ready")]})
    objs = [o for o in objects() if o["metadata"]["name"] != "demo-md-0-x-y"]
    objs += [ms, _machine("demo-md-0-abc-1", owner_ms="demo-md-0-abc")]
    md = build_tree(objs, "demo", Options(show_machinesets=True)).children[2].children[0]
    assert [c.name for c in md.children] == ["MachineSet/demo-md-0-abc"]
    assert [c.name for c in md.children[0].children] == ["Machine/demo-md-0-abc-1"]
    md2 = build_tree(objs, "demo", Options()).children[2].children[0]
    assert [c.name for c in md2.children] == ["Machine/demo-md-0-abc-1"]


def test_the_docker_host_of_a_placed_cluster_is_on_its_infrastructure_row() -> None:
    objs = objects()
    dc = next(o for o in objs if o["kind"] == "DockerCluster")
    dc["metadata"]["annotations"] = {"capd-py.dev/docker-host": "two"}
    root = build_tree(objs, "demo")
    assert root.children[0].name == "ClusterInfrastructure - DockerCluster/demo (docker host two)"
