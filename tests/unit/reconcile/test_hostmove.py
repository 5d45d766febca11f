"""`capd-py move` and docker hosts: the entries a moved cluster's host needs travel with it; disagreements and
hosts the source does not know stop the move before anything changes."""

from __future__ import annotations

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.reconcile import hostmove as hm

pytestmark = pytest.mark.unit

TWO = dh.DockerHost("two", "unix:///run/capd-py-dockerd-2.sock", labels={"zone": "b"}, address="192.0.2.2").to_data()
TLS = dh.DockerHost("b", "tcp://10.0.0.7:2376", tls_secret="b-docker-tls", address="10.0.0.7").to_data()
SSH = dh.DockerHost("c", "ssh://ci@builder", address="builder", ssh_secret="c-docker-ssh").to_data()


def _dc(name: str, host: str = "") -> dict:
    return {"kind": "DockerCluster", "metadata": {"namespace": "ns", "name": name,
                                                  "annotations": {dh.DOCKER_HOST_ANNOTATION: host} if host else {}}}


def test_placed_hosts_leave_local_and_unplaced_out() -> None:
    objs = [_dc("c1", "two"), _dc("c2", "two"), _dc("c3", "local"), _dc("c4"), {"kind": "Machine", "metadata": {}}]
    assert hm.placed_hosts(objs) == {"two": ["ns/c1", "ns/c2"]}


def test_entries_and_their_tls_secrets_are_added_where_the_target_lacks_them() -> None:
    got = hm.plan({"two": ["ns/c1"], "b": ["ns/c2"]}, {"two": TWO, "b": TLS, "other": TWO}, None)
    assert got.problems == () and got.add == {"two": TWO, "b": TLS} and got.secrets == ("b-docker-tls",)
    assert got.lines() == [f"docker host b (tcp://10.0.0.7:2376) is added to the target's {dh.NAMESPACE}/"
                           f"{dh.CONFIGMAP}", f"docker host two (unix:///run/capd-py-dockerd-2.sock) is added to the "
                           f"target's {dh.NAMESPACE}/{dh.CONFIGMAP}"]


def test_the_same_entry_at_the_target_needs_nothing_written() -> None:
    # same content, other spelling (key order): compared parsed, not as text
    reordered = "address: 192.0.2.2\nlabels: {zone: b}\nendpoint: unix:///run/capd-py-dockerd-2.sock\n"
    got = hm.plan({"two": ["ns/c1"]}, {"two": TWO}, {"two": reordered})
    assert got == hm.HostCopy()


def test_a_different_entry_of_that_name_at_the_target_is_refused() -> None:
    other = dh.DockerHost("two", "unix:///run/elsewhere.sock").to_data()
    got = hm.plan({"two": ["ns/c1"]}, {"two": TWO}, {"two": other})
    assert got.add == {} and len(got.problems) == 1
    assert "'two' (ns/c1) is configured differently at the target (source: unix:///run/capd-py-dockerd-2.sock; " \
           "target: unix:///run/elsewhere.sock" in got.problems[0]


def test_a_host_the_source_does_not_configure_is_refused_with_every_problem() -> None:
    got = hm.plan({"gone": ["ns/c1"], "two": ["ns/c2"]}, {"two": "endpoint: ftp://x"}, {})
    assert got.add == {} and len(got.problems) == 2
    assert "ns/c1 placed on docker host 'gone', which the source does not configure" in got.problems[0]
    assert got.problems[1].startswith("the source's docker host 'two': endpoint 'ftp://x'")


def test_an_invalid_target_configmap_is_refused() -> None:
    got = hm.plan({"two": ["ns/c1"]}, {"two": TWO}, {"x": "endpoint: unix://relative"})
    assert got.add == {} and "the target's capd-py-system/capd-py-docker-hosts is invalid" in got.problems[0]


def test_an_ssh_hosts_secret_travels_too() -> None:
    got = hm.plan({"c": ["ns/c3"], "b": ["ns/c2"]}, {"b": TLS, "c": SSH}, None)
    assert got.problems == () and got.secrets == ("b-docker-tls", "c-docker-ssh")
