from __future__ import annotations

import copy
import datetime as _dt
from typing import Any

import pytest

from capd_py.reconcile import machinedeployment as rmd
from capd_py.reconcile.machinedeployment import MS

try:
    from core_fixtures import NOW
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def md(replicas: int = 3, strategy: dict | None = None, **spec: object) -> dict:
    s: dict = {"clusterName": "c1", "replicas": replicas, "selector": {"matchLabels": {"pool": "a"}},
               "template": {"metadata": {"labels": {"pool": "a"}},
                            "spec": {"clusterName": "c1", "version": "v1.34.4",
                                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                           "kind": "DockerMachineTemplate", "name": "dmt"}}}}
    if strategy is not None:
        s["rollout"] = {"strategy": strategy}
    s.update(spec)
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md1", "namespace": "ns", "uid": "uid-md1", "generation": 1}, "spec": s}


# --- hash --------------------------------------------------------------------------------------

def test_hash_stable_and_key_order_independent() -> None:
    a = md()
    b = copy.deepcopy(a)
    b["spec"]["template"]["spec"] = dict(reversed(list(b["spec"]["template"]["spec"].items())))
    assert rmd.template_hash(a, NOW) == rmd.template_hash(b, NOW)
    assert len(rmd.template_hash(a, NOW)) == 10


def test_hash_changes_on_spec_not_on_in_place_fields() -> None:
    a = md()
    h = rmd.template_hash(a, NOW)
    b = copy.deepcopy(a)
    b["spec"]["template"]["spec"]["version"] = "v1.35.0"
    assert rmd.template_hash(b, NOW) != h
    c = copy.deepcopy(a)
    c["spec"]["template"]["spec"]["minReadySeconds"] = 30
    c["spec"]["template"]["spec"]["deletion"] = {"nodeDrainTimeoutSeconds": 10}
    c["spec"]["template"]["metadata"]["labels"]["extra"] = "1"
    c["spec"]["replicas"] = 9
    assert rmd.template_hash(c, NOW) == h


def test_rollout_after() -> None:
    a = md()
    h = rmd.template_hash(a, NOW)
    later = NOW + _dt.timedelta(hours=1)
    a["spec"]["rollout"] = {"after": later.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert rmd.template_hash(a, NOW) == h  # not yet
    h2 = rmd.template_hash(a, later + _dt.timedelta(seconds=1))
    assert h2 != h
    assert rmd.template_hash(a, later + _dt.timedelta(days=3)) == h2  # only one rollout


# --- strategy ----------------------------------------------------------------------------------

def test_strategy_defaults() -> None:
    assert rmd.strategy(md()) == ("RollingUpdate", 1, 0)
    assert rmd.strategy(md(strategy={"type": "OnDelete"}))[0] == "OnDelete"


@pytest.mark.parametrize("replicas,surge,unavail,want", [
    (10, "25%", "25%", (3, 2)),   # surge rounds up, unavailable rounds down
    (4, 0, 0, (0, 1)),            # both zero -> unavailable 1
    (3, 1, 0, (1, 0)),
    (5, "100%", "0%", (5, 0)),
    (1, "50%", "50%", (1, 0)),
])
def test_surge_unavailable(replicas: int, surge: int | str, unavail: int | str, want: tuple[int, int]) -> None:
    assert rmd.surge_unavailable(replicas, surge, unavail) == want


# --- rolling update ----------------------------------------------------------------------------

def simulate(replicas: int, surge: int | str, unavail: int | str, old: int, max_steps: int = 50) -> list[tuple]:
    """Drive rolling_update to completion; machines become available immediately after each step."""
    new, olds = MS("new", 0), [MS("old", old, available=old, actual=old, created="2020")]
    trace = []
    s_, u_ = rmd.surge_unavailable(replicas, surge, unavail)
    for _ in range(max_steps):
        scale = rmd.rolling_update(replicas, surge, unavail, new, olds)
        n, o = scale.replicas["new"], scale.replicas["old"]
        # invariants at every step
        assert n + o <= replicas + s_
        assert min(new.available, n) + min(olds[0].available, o) >= replicas - u_ or (n + o) > replicas
        trace.append((n, o))
        if (n, o) == (new.replicas, olds[0].replicas) and n == replicas and o == 0:
            break
        new = MS("new", n, available=n, actual=n)
        olds = [MS("old", o, available=o, actual=o, created="2020")]
    return trace


def test_rolling_update_surge1_unavail0() -> None:
    t = simulate(3, 1, 0, 3)
    assert t[0] == (1, 3)          # surge first, nothing removed while new is unavailable
    assert t[-1] == (3, 0)
    assert all(n + o <= 4 for n, o in t)


def test_rolling_update_surge0_unavail1() -> None:
    t = simulate(3, 0, 1, 3)
    assert t[0] == (0, 2)          # no surge: scale old down first
    assert t[-1] == (3, 0)


def test_rolling_update_percentages() -> None:
    t = simulate(10, "25%", "25%", 10)
    assert t[0] == (3, 8)          # +3 surge, -2 unavailable
    assert t[-1] == (10, 0)


def test_rolling_update_waits_for_new_availability() -> None:
    new = MS("new", 1, available=0, actual=1)
    olds = [MS("old", 3, available=3, actual=3)]
    s = rmd.rolling_update(3, 1, 0, new, olds)
    assert s.replicas == {"new": 1, "old": 3}  # blocked: nothing new is available yet
    new = MS("new", 1, available=1, actual=1)
    s = rmd.rolling_update(3, 1, 0, new, olds)
    assert s.replicas == {"new": 1, "old": 2}  # one available new -> one old can go (new grows next pass)


def test_rolling_update_unhealthy_old_removed_first() -> None:
    new = MS("new", 1, available=0, actual=1)
    olds = [MS("old", 3, available=1, actual=3)]
    s = rmd.rolling_update(3, 1, 1, new, olds)
    # max_scale_down = 4 - 2 - 1 = 1; it removes an unavailable old replica
    assert s.replicas == {"new": 1, "old": 2}


def test_rolling_update_multiple_olds_oldest_first() -> None:
    new = MS("new", 2, available=2, actual=2)
    olds = [MS("b", 1, available=1, actual=1, created="2022"), MS("a", 1, available=1, actual=1, created="2021")]
    s = rmd.rolling_update(3, 1, 0, new, olds)
    assert s.replicas["new"] == 2  # 4 = 3 + surge already
    assert s.replicas["a"] == 0 and s.replicas["b"] == 1


def test_rolling_update_scale_without_rollout() -> None:
    s = rmd.rolling_update(5, 1, 0, MS("new", 3, available=3, actual=3), [])
    assert s.replicas == {"new": 5}
    s = rmd.rolling_update(2, 1, 0, MS("new", 5, available=5, actual=5), [])
    assert s.replicas == {"new": 2}


def test_rolling_update_md_scaled_down_mid_rollout() -> None:
    new = MS("new", 2, available=2, actual=2)
    olds = [MS("old", 4, available=4, actual=4)]
    s = rmd.rolling_update(2, 1, 0, new, olds)
    assert s.replicas["new"] + s.replicas["old"] <= 3
    assert s.replicas["new"] == 2


# --- OnDelete ----------------------------------------------------------------------------------

def test_on_delete_only_follows_deleted_machines() -> None:
    new = MS("new", 0)
    olds = [MS("old", 3, available=3, actual=3)]
    assert rmd.on_delete(3, new, olds).replicas == {"new": 0, "old": 3}
    olds = [MS("old", 3, available=2, actual=2)]  # a user deleted one old Machine
    assert rmd.on_delete(3, new, olds).replicas == {"new": 1, "old": 2}


def test_on_delete_scale_down() -> None:
    olds = [MS("old", 3, available=3, actual=3, created="2020")]
    assert rmd.on_delete(1, MS("new", 0), olds).replicas == {"new": 0, "old": 1}


# --- MachineSet shape / cleanup / revision -----------------------------------------------------

def test_desired_machine_set() -> None:
    d = md(3, deletion={"order": "Oldest"})
    ms = rmd.desired_machine_set(d, "abc123", 1, 4)
    assert ms["metadata"]["name"] == "md1-abc123"
    assert ms["metadata"]["labels"]["machine-template-hash"] == "abc123"
    assert ms["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] == "md1"
    assert ms["spec"]["selector"]["matchLabels"] == {"pool": "a", "machine-template-hash": "abc123",
                                                     "cluster.x-k8s.io/set-name": "md1-abc123"}
    assert ms["spec"]["template"]["metadata"]["labels"]["cluster.x-k8s.io/set-name"] == "md1-abc123"
    assert ms["spec"]["template"]["metadata"]["labels"]["machine-template-hash"] == "abc123"
    assert ms["spec"]["deletion"] == {"order": "Oldest"}
    assert ms["metadata"]["annotations"]["machinedeployment.clusters.x-k8s.io/revision"] == "4"
    assert ms["metadata"]["ownerReferences"][0]["uid"] == "uid-md1"
    assert ms["spec"]["replicas"] == 1


def test_in_place_updates() -> None:
    d = md()
    ms = rmd.desired_machine_set(d, "h", 3, 1)
    assert rmd.in_place_updates(d, ms) is None
    d["spec"]["template"]["metadata"]["labels"]["new"] = "x"
    d["spec"]["template"]["spec"]["minReadySeconds"] = 5
    p = rmd.in_place_updates(d, ms)
    assert p is not None
    assert p["spec"]["template"]["metadata"]["labels"]["new"] == "x"
    assert p["spec"]["template"]["metadata"]["labels"]["machine-template-hash"] == "h"
    assert p["spec"]["template"]["spec"]["minReadySeconds"] == 5


def test_cleanup_only_empty_caught_up_old_sets() -> None:
    def ms(name: str, replicas: int, status_replicas: int, gen: int = 1, observed: int = 1) -> dict:
        return {"metadata": {"name": name, "generation": gen}, "spec": {"replicas": replicas},
                "status": {"replicas": status_replicas, "observedGeneration": observed}}
    got = rmd.cleanup([ms("a", 0, 0), ms("b", 0, 1), ms("c", 1, 1), ms("d", 0, 0, gen=2, observed=1)])
    assert [m["metadata"]["name"] for m in got] == ["a"]


def test_revision_parse() -> None:
    assert rmd.revision({"metadata": {"annotations": {"machinedeployment.clusters.x-k8s.io/revision": "7"}}}) == 7
    assert rmd.revision({"metadata": {}}) == 0


def test_status() -> None:
    d = md(3)
    new = {"metadata": {"name": "new"}, "spec": {"replicas": 2},
           "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 2}}
    old = {"metadata": {"name": "old"}, "spec": {"replicas": 2},
           "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 1, "upToDateReplicas": 2}}
    st = rmd.compute_status(d, [new, old], "new", [])
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["upToDateReplicas"]) == (4, 4, 3, 2)
    assert st["phase"] == "ScalingDown"
    byt = {c["type"]: c for c in st["conditions"]}
    assert byt["RollingOut"]["status"] == "True" and "old" in byt["RollingOut"]["message"]
    assert byt["Available"]["status"] == "True"       # 3 available >= 3 - 0
    assert byt["MachinesUpToDate"]["status"] == "False"
    assert byt["ScalingDown"]["status"] == "True"
    assert st["selector"] == "pool=a"
    st2 = rmd.compute_status(d, [new], "new", [])
    byt2 = {c["type"]: c for c in st2["conditions"]}
    assert byt2["RollingOut"]["status"] == "False"
    assert byt2["Available"]["status"] == "False"
    assert st2["phase"] == "ScalingUp"


def test_spec_defaults_patch() -> None:
    d = md()
    d["spec"]["selector"] = {"matchLabels": None}
    p = rmd.spec_defaults_patch(d)
    want = {"cluster.x-k8s.io/deployment-name": "md1", "cluster.x-k8s.io/cluster-name": "c1"}
    assert p == {"spec": {"selector": {"matchLabels": want}, "template": {"metadata": {"labels": want}}}}
    d["spec"]["selector"] = {"matchLabels": dict(want)}
    d["spec"]["template"]["metadata"]["labels"].update(want)
    assert rmd.spec_defaults_patch(d) is None


def test_empty_selector_not_written_to_status() -> None:
    d = md()
    d["spec"]["selector"] = {}
    assert "selector" not in rmd.compute_status(d, [], None, [])


def test_template_refs() -> None:
    md: dict[str, Any]
    md = {"spec": {"template": {"spec": {
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate",
                                    "name": "w"}},
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate",
                              "name": "w"}}}}}
    assert [r["kind"] for r in rmd.template_refs(md)] == ["DockerMachineTemplate", "KubeadmConfigTemplate"]
    # a bootstrap data secret, or a reference to something that is not a template: nothing to own
    md["spec"]["template"]["spec"]["bootstrap"] = {"dataSecretName": "s"}
    md["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = "DockerMachine"
    assert rmd.template_refs(md) == []
    assert rmd.template_refs({"spec": {}}) == []


def test_v1beta1_counters_from_the_machinesets() -> None:
    # upstream's calculateV1Beta1Status: updated = the new MachineSet's replicas; ready / available summed from the
    # MachineSets' v1beta1 counters; unavailable = their spec.replicas minus available, never below zero
    def one(name: str, spec: int, replicas: int, ready: int, available: int) -> dict:
        return {"metadata": {"name": name}, "spec": {"replicas": spec},
                "status": {"replicas": replicas, "deprecated": {"v1beta1": {"readyReplicas": ready,
                                                                            "availableReplicas": available}}}}
    st = rmd.compute_status(md(3), [one("new", 2, 2, 2, 1), one("old", 2, 2, 1, 1)], "new", [])
    assert st["deprecated"]["v1beta1"] == {"updatedReplicas": 2, "readyReplicas": 3, "availableReplicas": 2,
                                           "unavailableReplicas": 2}
    down = rmd.compute_status(md(1), [one("new", 0, 3, 3, 3)], "new", [])
    assert down["deprecated"]["v1beta1"]["unavailableReplicas"] == 0
