"""Docker hosts configuration: parsing, validation messages, rendering round trip, the implicit `local` host."""

from __future__ import annotations

import pytest

from capd_py.api import dockerhosts as dh

pytestmark = pytest.mark.unit


def test_no_configmap_is_the_local_socket_only() -> None:
    hosts = dh.parse_hosts(None)
    assert list(hosts) == ["local"]
    assert hosts["local"].endpoint == "" and hosts["local"].address == ""
    assert dh.parse_hosts({}) == hosts


def test_entries_parse_with_labels_capacity_and_defaults() -> None:
    hosts = dh.parse_hosts({
        "b": "endpoint: tcp://10.0.0.7:2376\ntlsSecretName: b-tls\nlabels: {zone: a}\ncapacity: {clusters: 3}\n",
        "c": '{"endpoint": "ssh://ci@builder-3"}',
        "d": "endpoint: unix:///run/capd-py-dockerd-2.sock\naddress: 192.0.2.2\n",
    })
    assert sorted(hosts) == ["b", "c", "d", "local"]
    b = hosts["b"]
    assert (b.scheme, b.tls_secret, dict(b.labels), b.max_clusters, b.address) == ("tcp", "b-tls", {"zone": "a"}, 3,
                                                                                  "10.0.0.7")
    assert hosts["c"].address == "builder-3"      # ssh: the endpoint's host
    assert hosts["d"].address == "192.0.2.2"      # a unix socket has none unless given
    assert dh.parse_host("e", "endpoint: unix:///x.sock").address == ""


def test_local_can_be_configured() -> None:
    hosts = dh.parse_hosts({"local": "endpoint: unix:///var/run/docker.sock\nlabels: {zone: z}"})
    assert hosts["local"].endpoint == "unix:///var/run/docker.sock"
    assert hosts["local"].labels == {"zone": "z"}


@pytest.mark.parametrize(("name", "value", "message"), [
    ("Bad_Name", "endpoint: unix:///x", "lowercase RFC 1123 label"),
    ("h", "- a list", "expected a mapping"),
    ("h", "endpoint: [", "not YAML"),
    ("h", "labels: {a: b}", "`endpoint` is required"),
    ("h", "endpoint: http://x:1", "scheme must be one of unix://, tcp://, ssh://"),
    ("h", "endpoint: unix://relative.sock", "unix:///absolute/path"),
    ("h", "endpoint: tcp://10.0.0.1", "needs a port"),
    ("h", "endpoint: tcp://10.0.0.1:99999\ninsecure: true", "port is not a number"),
    ("h", "endpoint: tcp://10.0.0.1:2375", "needs `tlsSecretName`"),
    ("h", "endpoint: ssh://x\ntlsSecretName: s", "tcp:// endpoints only"),
    ("h", "endpoint: tcp://x:2376\ntlsSecretName: t\nsshSecretName: s", "ssh:// endpoints only"),
    ("h", "endpoint: ssh://x\nsshSecretName: [s]", "`sshSecretName` are strings"),
    ("h", "endpoint: ssh://x\nlabels: {a: 1}", "maps strings to strings"),
    ("h", "endpoint: ssh://x\ncapacity: {clusters: -1}", "N >= 0"),
    ("h", "endpoint: ssh://x\ncapacity: {cpus: 2}", "N >= 0"),
    ("h", "endpoint: ssh://x\nport: 22", "unknown field(s) port"),
    ("h", "endpoint: ssh://x\naddress: 10.0.0.0/8", "host name or IP address"),
])
def test_invalid_entries_name_host_and_field(name: str, value: str, message: str) -> None:
    with pytest.raises(dh.HostConfigError) as e:
        dh.parse_hosts({name: value})
    assert f"docker host {name!r}" in str(e.value)
    assert message in str(e.value)


def test_insecure_tcp_is_allowed_when_asked_for() -> None:
    h = dh.parse_host("h", "endpoint: tcp://10.0.0.1:2375\ninsecure: true")
    assert h.insecure and not h.tls_secret


def test_to_data_round_trips() -> None:
    for h in (dh.DockerHost("b", "tcp://10.0.0.7:2376", "b-tls", {"zone": "a"}, 3, False, "10.0.0.7"),
              dh.DockerHost("c", "ssh://ci@builder:2222", address="builder"),
              dh.DockerHost("f", "ssh://ci@builder", address="builder", ssh_secret="f-docker-ssh"),
              dh.DockerHost("d", "unix:///run/x.sock", address="192.0.2.2"),
              dh.DockerHost("e", "tcp://10.0.0.1:2375", insecure=True, address="10.0.0.1")):
        assert dh.parse_host(h.name, h.to_data()) == h


def test_selector_and_host_of() -> None:
    assert dh.parse_selector("zone=a, tier = ci") == {"zone": "a", "tier": "ci"}
    assert dh.parse_selector("") == {}
    with pytest.raises(dh.HostConfigError, match="KEY=VALUE"):
        dh.parse_selector("zone")
    assert dh.host_of(None) == ""
    assert dh.host_of({"metadata": {"annotations": {dh.DOCKER_HOST_ANNOTATION: "b"}}}) == "b"


def test_a_hosts_secret_and_its_keys() -> None:
    tls = dh.parse_host("b", "endpoint: tcp://10.0.0.7:2376\ntlsSecretName: b-tls")
    ssh = dh.parse_host("c", "endpoint: ssh://ci@builder\nsshSecretName: c-ssh")
    plain = dh.parse_host("d", "endpoint: ssh://ci@builder")
    assert (tls.secret, tls.secret_keys) == ("b-tls", dh.TLS_KEYS)
    assert (ssh.secret, ssh.secret_keys, ssh.ssh_secret) == ("c-ssh", ("ssh-privatekey", "known_hosts"), "c-ssh")
    assert (plain.secret, plain.secret_keys) == ("", ())
