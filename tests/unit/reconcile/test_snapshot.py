"""reconcile/snapshot.py: the manifest (container specs and network round-trip), what a restore in place refuses,
and restore_plan: in place or recreate, what a recreating restore does in each phase and what it refuses."""

from __future__ import annotations

import pytest

from capd_py.api.containers import ContainerSpec, Mount, NetworkInfo, PortMapping
from capd_py.reconcile import snapshot as sn

pytestmark = pytest.mark.unit

NODE = "capd-py/node:v1.34.4"
LB_IMG = "kindest/haproxy:v20230606-42a2262b"
M = sn.manifest("default", "c1", "s1", "2026-12-05T02:00:00Z", [
    sn.Saved("c1-control-plane-a", "control-plane", NODE, "sha256:node", ("/", "/var")),
    sn.Saved("c1-lb", "load-balancer", LB_IMG, "sha256:lb", ("/",)),
], 123)
FOLDERS = {"c1-control-plane-a/rootfs", "c1-control-plane-a/vol_var", "c1-lb/rootfs"}
NOW: dict[str, str | None] = {"c1-control-plane-a": NODE, "c1-lb": LB_IMG}
IDS: dict[str, str | None] = {NODE: "sha256:node", LB_IMG: "sha256:lb"}


def test_round_trip_and_folders() -> None:
    assert [c.name for c in sn.saved(M)] == ["c1-control-plane-a", "c1-lb"]
    assert sn.saved(M)[0].mounts == ("/", "/var")
    assert (sn.folder_of("/"), sn.folder_of("/var"), sn.folder_of("/var/lib/x")) == ("rootfs", "vol_var",
                                                                                      "vol_var_lib_x")


@pytest.mark.parametrize(("folders", "now", "ids", "want"), [
    (FOLDERS, NOW, IDS, []),
    (FOLDERS - {"c1-control-plane-a/vol_var"}, NOW, IDS,
     ["the snapshot lacks c1-control-plane-a's /var (incomplete: delete it)"]),
    (FOLDERS, {"c1-lb": LB_IMG}, IDS,
     ["container c1-control-plane-a is gone: a restore in place needs the snapshot's containers (the cluster was "
      "deleted or that machine replaced since)"]),
    (FOLDERS, NOW, {**IDS, NODE: None}, ["image capd-py/node:v1.34.4 is gone: build it again (make images) before "
                                         "restoring"]),
    (FOLDERS, NOW, {**IDS, NODE: "sha256:other"},
     ["image capd-py/node:v1.34.4 is now sha256:other, the snapshot was taken on sha256:node"]),
    (FOLDERS, {**NOW, "c1-md-0-new": NODE}, IDS,
     ["containers made after the snapshot: c1-md-0-new (scale the cluster back to the snapshot's machines first)"]),
], ids=["ok", "incomplete", "container-gone", "image-gone", "image-changed", "extra-container"])
def test_restore_problems(folders: set[str], now: dict[str, str | None], ids: dict[str, str | None],
                          want: list[str]) -> None:
    assert sn.restore_problems(M, folders, now, ids) == want


def test_format_version_and_names() -> None:
    assert sn.restore_problems({**M, "version": 9}, FOLDERS, NOW, IDS) == [
        "snapshot format version 9, this capd-py reads 1, 2"]
    assert sn.name_problem("before-upgrade.1") is None
    assert sn.name_problem("Bad/Name") is not None and sn.name_problem("-x") is not None
    assert (sn.human(512), sn.human(3 * 1024 ** 2), sn.human(5 * 1024 ** 3)) == ("512 B", "3.0 MiB", "5.0 GiB")


# -- format 2: specs, network, restore_plan ----------------------------------------------------------------------

LABELS = {"io.x-k8s.capd-py.cluster": "c1", "io.x-k8s.capd-py.namespace": "default"}
CP_SPEC = ContainerSpec(name="c1-control-plane-a", image=NODE, hostname="c1-control-plane-a", network="c1-net",
                        labels={**LABELS, "io.x-k8s.capd-py.role": "control-plane"},
                        mounts=(Mount("/data", "/mnt/data", read_only=True),), privileged_mode="restricted",
                        restart_policy="unless-stopped", ipv4="172.20.0.3",
                        sysctls={"net.ipv6.conf.all.forwarding": "1"})
LB_SPEC = ContainerSpec(name="c1-lb", image=LB_IMG, hostname="c1-lb", network="c1-net",
                        labels={**LABELS, "io.x-k8s.capd-py.role": "load-balancer"},
                        ports=(PortMapping(6443, 41234),), node=False, restart_policy="unless-stopped",
                        ipv4="172.20.0.2")
NET = sn.SavedNetwork("c1-net", dict(LABELS), "172.20.0.0/24")
M2 = sn.manifest("default", "c1", "s1", "2026-12-05T02:00:00Z", [
    sn.Saved("c1-control-plane-a", "control-plane", NODE, "sha256:node", ("/", "/var"), CP_SPEC),
    sn.Saved("c1-lb", "load-balancer", LB_IMG, "sha256:lb", ("/",), LB_SPEC),
], 123, NET, 9)
NETINFO = NetworkInfo("c1-net", "id", "172.20.0.0/24", "172.20.0.1", dict(LABELS))
BOX = sn.Box("default", "c1", "exited", NODE)


def test_specs_and_network_round_trip_through_json() -> None:
    import json
    m = json.loads(json.dumps(M2))
    assert [c.spec for c in sn.saved(m)] == [CP_SPEC, LB_SPEC]
    assert sn.saved_network(m) == NET and m["objects"] == 9
    assert sn.saved_network(M) is None and sn.saved(M)[0].spec is None  # format 1: neither


def now(**kw: object) -> sn.Now:
    base: dict[str, object] = {"cluster_uid": None, "boxes": {}, "network": None, "image_ids": IDS, "progress": None}
    return sn.Now(**{**base, **kw})  # type: ignore[arg-type]


NAMES = ("c1-control-plane-a", "c1-lb")


@pytest.mark.parametrize(("m", "objects_saved", "observed", "want"), [
    # the Cluster exists and nothing is under way: in place (its own checks)
    (M2, True, now(cluster_uid="u1", boxes={"c1-control-plane-a": BOX, "c1-lb": BOX}),
     sn.Plan(sn.IN_PLACE, sync=NAMES)),
    (M2, True, now(cluster_uid="u1", boxes={"c1-lb": BOX}),
     sn.Plan(sn.IN_PLACE, ("container c1-control-plane-a is gone: a restore in place needs the snapshot's containers "
                           "(the cluster was deleted or that machine replaced since)",), sync=NAMES)),
    # deleted with everything: network, both containers, storage, objects
    (M2, True, now(), sn.Plan(sn.RECREATE, make_network=True, create=NAMES, sync=NAMES, objects=True)),
    # deleted objects, containers left (one still running): stopped before their storage is written
    (M2, True, now(network=NETINFO, boxes={"c1-control-plane-a": sn.Box("default", "c1", "running", NODE),
                                           "c1-lb": BOX}),
     sn.Plan(sn.RECREATE, stop=("c1-control-plane-a",), sync=NAMES, objects=True)),
    # a killed run resumed: storage done, objects being made (its Cluster exists), one container removed since
    (M2, True, now(cluster_uid="new", network=NETINFO, boxes={"c1-lb": BOX},
                   progress={"phase": "objects", "clusterUID": "new"}),
     sn.Plan(sn.RECREATE, create=("c1-control-plane-a",), sync=("c1-control-plane-a",), objects=True)),
    # killed while starting: only the start is left
    (M2, True, now(cluster_uid="new", network=NETINFO, boxes={"c1-control-plane-a": BOX, "c1-lb": BOX},
                   progress={"phase": "start", "clusterUID": "new"}), sn.Plan(sn.RECREATE)),
    # the Cluster it made was deleted again meanwhile: everything anew
    (M2, True, now(progress={"phase": "start", "clusterUID": "new"}),
     sn.Plan(sn.RECREATE, make_network=True, create=NAMES, sync=NAMES, objects=True)),
], ids=["in-place", "in-place-refused", "recreate-all", "recreate-containers-left", "resume-objects", "resume-start",
        "resume-deleted-again"])
def test_restore_plan(m: dict[str, object], objects_saved: bool, observed: sn.Now, want: sn.Plan) -> None:
    assert sn.restore_plan(m, FOLDERS, objects_saved, observed) == want


@pytest.mark.parametrize(("m", "objects_saved", "observed", "problem"), [
    (M, False, now(), "the snapshot holds no management objects or container specs (taken by a capd-py before "
                      "format 2): it can only be restored in place, onto the cluster it was taken of"),
    (M2, False, now(), "the snapshot holds no management objects"),
    (M2, True, now(image_ids={**IDS, LB_IMG: None}),
     "image kindest/haproxy:v20230606-42a2262b is gone: build it again (make images) before restoring"),
    (M2, True, now(image_ids={**IDS, NODE: "sha256:other"}),
     "image capd-py/node:v1.34.4 is now sha256:other, the snapshot was taken on sha256:node"),
    (M2, True, now(cluster_uid="theirs", progress={"phase": "storage"}),
     "Cluster default/c1 exists and is not the one this restore made: another cluster took the name since "
     "(delete it first)"),
    (M2, True, now(cluster_uid="theirs", progress={"phase": "objects", "clusterUID": "mine"}),
     "Cluster default/c1 exists and is not the one this restore made"),
    (M2, True, now(boxes={"c1-lb": sn.Box("other", "c1", "running", LB_IMG)}),
     "container name c1-lb is in use by cluster other/c1"),
    (M2, True, now(boxes={"c1-md-0-x": BOX}),
     "containers of the cluster not in the snapshot: c1-md-0-x (remove them: docker rm -f)"),
    (M2, True, now(network=NetworkInfo("c1-net", "id", "172.20.0.0/24", "", {"io.x-k8s.capd-py.cluster": "c2",
                                                                             "io.x-k8s.capd-py.namespace": "default"})),
     "docker network c1-net belongs to cluster default/c2"),
    (M2, True, now(network=NetworkInfo("c1-net", "id", "172.21.0.0/24", "", dict(LABELS))),
     "docker network c1-net has subnet 172.21.0.0/24, the snapshot's addresses are in 172.20.0.0/24 (remove the "
     "network)"),
    ({**M2, "version": 3}, True, now(), "snapshot format version 3, this capd-py reads 1, 2"),
], ids=["format-1", "no-objects-file", "image-gone", "image-changed", "name-taken", "name-taken-midway",
        "container-name-taken", "extra-container", "network-of-another", "network-subnet", "version"])
def test_restore_plan_refusals(m: dict[str, object], objects_saved: bool, observed: sn.Now, problem: str) -> None:
    plan = sn.restore_plan(m, FOLDERS, objects_saved, observed)
    assert plan.mode == sn.RECREATE and not (plan.create or plan.sync or plan.objects or plan.make_network)
    assert any(p.startswith(problem) for p in plan.problems), plan.problems


def test_incomplete_snapshot_refused_for_recreate_too() -> None:
    plan = sn.restore_plan(M2, FOLDERS - {"c1-lb/rootfs"}, True, now())
    assert plan.problems == ("the snapshot lacks c1-lb's / (incomplete: delete it)",)
