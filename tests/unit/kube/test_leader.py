"""Leader election decisions (pure): who may write the Lease, and what."""

from __future__ import annotations

import datetime as dt

import pytest

from capd_py.kube.leader import Config, Observation, Record, micro_time, next_spec, released

pytestmark = pytest.mark.unit

CFG = Config(namespace="capd-py-system", identity="b_2")
T0 = dt.datetime(2026, 12, 3, 8, 0, 0, 123456, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(seconds=3)


def held(holder: str = "a_1", transitions: int = 4) -> Record:
    return Record(holder, 15, micro_time(T0), micro_time(T0), transitions)


def test_no_lease_is_created_with_us_as_holder() -> None:
    assert next_spec(None, None, CFG, now=100.0, wall=T0) == Record("b_2", 15, "2026-12-03T08:00:00.123456Z",
                                                                    "2026-12-03T08:00:00.123456Z", 0)


def test_another_holders_lease_is_respected_until_it_expires_on_our_clock() -> None:
    obs = Observation(held(), at=100.0)
    assert next_spec(held(), obs, CFG, now=114.9, wall=T1) is None
    # no renewal seen for the lease duration: taken over, one more transition
    assert next_spec(held(), obs, CFG, now=115.0, wall=T1) == Record("b_2", 15, micro_time(T1), micro_time(T1), 5)


def test_a_renewal_restarts_the_wait() -> None:
    obs = Observation(held(), at=100.0)
    renewed = Record("a_1", 15, micro_time(T0), micro_time(T1), 4)
    obs = obs.update(renewed, now=110.0)
    assert obs.at == 110.0 and obs.update(renewed, now=120.0) is obs  # an unchanged record keeps its time
    assert next_spec(renewed, obs, CFG, now=124.0, wall=T1) is None
    assert next_spec(renewed, obs, CFG, now=125.0, wall=T1) is not None


def test_timestamps_written_by_others_are_not_trusted() -> None:
    """A holder whose renewTime lies far in the past (skewed clock) still gets its full lease duration from
    when we first saw the record."""
    old = Record("a_1", 15, "2000-01-01T00:00:00.000000Z", "2000-01-01T00:00:00.000000Z", 1)
    assert next_spec(old, Observation(old, at=100.0), CFG, now=101.0, wall=T1) is None


def test_the_holder_renews_keeping_acquire_time_and_transitions() -> None:
    mine = Record("b_2", 15, micro_time(T0), micro_time(T0), 7)
    assert next_spec(mine, Observation(mine, at=100.0), CFG, now=102.0, wall=T1) == \
        Record("b_2", 15, micro_time(T0), micro_time(T1), 7)


def test_a_released_lease_is_taken_at_once() -> None:
    rel = released(held(), T1)
    assert rel == Record("", 1, micro_time(T1), micro_time(T1), 4)
    assert next_spec(rel, Observation(rel, at=100.0), CFG, now=100.0, wall=T1) == \
        Record("b_2", 15, micro_time(T1), micro_time(T1), 5)


def test_record_round_trips_the_lease_spec() -> None:
    r = held()
    lease = {"spec": r.spec()}
    assert Record.of(lease) == r and Record.of({}) == Record()
    assert set(r.spec()) == {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"}


def test_durations_must_leave_a_margin() -> None:
    with pytest.raises(ValueError):
        Config(namespace="n", identity="i", lease_duration=10, renew_deadline=10)
    Config(namespace="n", identity="i", lease_duration=3, renew_deadline=2, retry_period=0.5)
