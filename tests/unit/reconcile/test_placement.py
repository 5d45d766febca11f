"""Placing a DockerCluster on a docker host: the annotation wins, pre-hosts clusters stay local, the scheduler
prefers hosts with the images, spreads by label, respects capacity and selectors."""

from __future__ import annotations

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.reconcile import placement as p

pytestmark = pytest.mark.unit


def _hosts(*hosts: dh.DockerHost) -> dict[str, dh.DockerHost]:
    return {h.name: h for h in (dh.LOCAL_HOST, *hosts)}


A = dh.DockerHost("a", "ssh://a", labels={"zone": "z1"}, address="a")
B = dh.DockerHost("b", "ssh://b", labels={"zone": "z2"}, max_clusters=2, address="b")
ALL = {"local": True, "a": True, "b": True}


def test_annotation_names_the_host() -> None:
    got = p.place(_hosts(A, B), {dh.DOCKER_HOST_ANNOTATION: "b"}, False, {"b": 5}, {})
    assert (got.host, got.new, got.copy_from) == ("b", False, "")


def test_annotation_naming_an_unknown_host_is_refused() -> None:
    got = p.place(_hosts(A), {dh.DOCKER_HOST_ANNOTATION: "gone"}, False, {}, ALL)
    assert got.host is None and got.reason == p.R_UNKNOWN_HOST
    assert "'gone' is not configured (known: a, local;" in got.message


def test_a_cluster_provisioned_before_hosts_stays_local() -> None:
    got = p.place(_hosts(A, B), {}, True, {"local": 9}, ALL)
    assert (got.host, got.new) == ("local", True)


def test_least_loaded_host_with_the_images() -> None:
    got = p.place(_hosts(A, B), {}, False, {"local": 2, "a": 1, "b": 0}, ALL)
    assert got.host == "b" and got.new and not got.copy_from
    # capacity scales the load: b holds 1 of 2 (0.5), a holds 1 (unlimited: 1.0)
    assert p.place(_hosts(A, B), {}, False, {"local": 2, "a": 1, "b": 1}, ALL).host == "b"
    # ties go by name
    assert p.place(_hosts(A, B), {}, False, {"local": 1, "a": 1, "b": 2}, {**ALL}).host == "a"


def test_hosts_with_the_images_come_first_else_copy_from_one_that_has_them() -> None:
    got = p.place(_hosts(A, B), {}, False, {"local": 5}, {"local": True, "a": False, "b": False})
    assert got.host == "local" and not got.copy_from
    got = p.place({"a": A, "b": B}, {}, False, {}, {"a": False, "b": False, "local": True})
    assert (got.host, got.copy_from) == ("a", "")  # `local` is not a candidate here: nothing to copy from
    got = p.place(_hosts(A, B), {dh.HOST_SELECTOR_ANNOTATION: "zone=z2"}, False, {}, {"local": True, "a": True})
    assert (got.host, got.copy_from) == ("b", "a")


def test_capacity_is_respected() -> None:
    got = p.place(_hosts(A, B), {dh.HOST_SELECTOR_ANNOTATION: "zone=z2"}, False, {"b": 2}, ALL)
    assert got.host is None and got.reason == p.R_NO_HOST
    assert "b 2/2" in got.message


def test_selector_without_match() -> None:
    got = p.place(_hosts(A, B), {dh.HOST_SELECTOR_ANNOTATION: "zone=z9"}, False, {}, ALL)
    assert got.host is None and got.reason == p.R_NO_HOST and "zone" in got.message
    bad = p.place(_hosts(A), {dh.HOST_SELECTOR_ANNOTATION: "zone"}, False, {}, ALL)
    assert bad.host is None and bad.reason == p.R_INVALID


def test_spread_by_label_prefers_the_emptiest_value() -> None:
    a2 = dh.DockerHost("a2", "ssh://a2", labels={"zone": "z1"}, address="a2")
    hosts = {"a": A, "a2": a2, "b": dh.DockerHost("b", "ssh://b", labels={"zone": "z2"}, address="b")}
    loads = {"a": 1, "a2": 0, "b": 1}
    # without spreading: the least loaded host (a2)
    assert p.place(hosts, {}, False, loads, {"a": True, "a2": True, "b": True}).host == "a2"
    # spreading by zone: z1 holds 1 cluster, z2 holds 1 too -> tie on zone, then the load: a2
    assert p.place(hosts, {dh.SPREAD_ANNOTATION: "zone"}, False, loads,
                   {"a": True, "a2": True, "b": True}).host == "a2"
    loads = {"a": 1, "a2": 1, "b": 1}
    # z1 holds 2, z2 holds 1: b, although every host holds one
    assert p.place(hosts, {dh.SPREAD_ANNOTATION: "zone"}, False, loads,
                   {"a": True, "a2": True, "b": True}).host == "b"


FD = dh.FAILURE_DOMAIN_HOST_ATTRIBUTE


def _fd(name: str, host: str = "", cp: bool = False) -> dict:
    return {"name": name, "controlPlane": cp, **({"attributes": {FD: host, "rack": "r1"}} if host else {})}


def test_failure_domains_on_the_clusters_host_are_offered_others_refused() -> None:
    domains = [_fd("a", "two", True), _fd("b", "three", True), _fd("c"), _fd("d", "gone")]
    got = p.domains_on_host(domains, "two")
    assert [d["name"] for d in got.usable] == ["a", "c"] and got.named
    assert sorted(got.refused) == ["b", "d"]
    assert got.refused["b"].startswith("names docker host 'three' but the cluster's network and load balancer are "
                                       "on 'two': the nodes of one cluster need one network")
    assert got.message().startswith("failure domain 'b': names docker host 'three'")


def test_failure_domains_without_a_host_are_as_before() -> None:
    got = p.domains_on_host([_fd("a"), _fd("b")], "local")
    assert (len(got.usable), got.refused, got.named) == (2, {}, False)
    assert p.domains_on_host(None, "local") == p.DomainHosts([], {}, False)
    # naming `local` for a cluster on `local` (unplaced clusters are on local) is accepted
    assert p.domains_on_host([_fd("a", "local")], "local").refused == {}


def test_a_machine_set_by_hand_into_a_refused_domain_is_refused() -> None:
    domains = [_fd("a", "two"), _fd("b", "three")]
    assert p.machine_domain_refusal(domains, "two", "a") == ""
    assert p.machine_domain_refusal(domains, "two", "") == ""
    assert p.machine_domain_refusal(domains, "two", "unknown") == ""  # Cluster API's to judge, not a host matter
    msg = p.machine_domain_refusal(domains, "two", "b")
    assert msg.startswith("the Machine's failure domain 'b' names docker host 'three'")
    assert msg.endswith("set another failure domain or none")
