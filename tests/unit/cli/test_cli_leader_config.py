"""`capd-py controllers --leader-elect`: which Lease, and who this process is."""

from __future__ import annotations

import pytest

from capd_py.cli.run import leader_config
from capd_py.kube import leader

pytestmark = pytest.mark.unit


def test_in_a_pod_the_lease_is_in_its_namespace_and_the_identity_starts_with_its_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "capd-py-system")
    monkeypatch.setenv("POD_NAME", "capd-py-controllers-775594bbb9-9q585")
    a, b = leader_config(None, None), leader_config(None, None)
    assert a.namespace == "capd-py-system" and a.name == leader.DEFAULT_LEASE_NAME == "capd-py-controllers"
    assert a.identity.partition("_")[0] == "capd-py-controllers-775594bbb9-9q585"
    assert a.identity != b.identity  # a restarted process is someone else: it never renews a dead one's lease
    assert (a.lease_duration, a.renew_deadline, a.retry_period) == (15.0, 10.0, 2.0)


def test_outside_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    monkeypatch.delenv("POD_NAME", raising=False)
    c = leader_config("elsewhere", None)
    assert c.namespace == "elsewhere" and c.identity.count("_") >= 1
    assert leader_config(None, None).namespace == "capd-py-system"
