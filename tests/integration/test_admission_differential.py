"""capd-py's admission agrees with upstream's on a fixed sample of generated inputs (issue 42 item 1): each of
SAMPLE seeded mutations of upstream's own templates (capd_py.testing.admission_inputs) goes to an API server set
up as `capd-py init` sets one up and to one serving upstream's CRDs and webhooks (upstream's four managers, `make
upstream`); accepted or refused, the refusal's code and field paths, and what defaulting made of an accepted
object must be the same. `make conformance` runs 5 000 (python -m capd_py.testing.admission_oracle)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capd_py.testing import upstream_managers as um
from capd_py.testing.admission_inputs import cases
from capd_py.testing.admission_oracle import NAMESPACE, Outcome, planes, report, run

pytestmark = [pytest.mark.integration, pytest.mark.upstream, pytest.mark.docker_free]

SAMPLE = 500
SEED = 42


@pytest.fixture(scope="module")
def outcomes() -> Iterator[list[Outcome]]:
    why = um.missing()
    assert not why, f"{why} (run `make upstream`)"  # a missing prerequisite fails (CONVENTIONS)
    with planes() as (mine, theirs):
        yield run(mine, theirs, cases(SEED, SAMPLE, NAMESPACE))


def test_the_sample_covers_refusals_acceptances_and_updates(outcomes: list[Outcome]) -> None:
    refused = sum(not o.upstream.allowed for o in outcomes)
    updates = sum(o.case.base is not None for o in outcomes)
    kinds = {o.case.obj["kind"] for o in outcomes}
    assert len(outcomes) == SAMPLE
    assert SAMPLE * 0.2 < refused < SAMPLE * 0.8, refused
    assert updates > SAMPLE * 0.1, updates
    assert len(kinds) >= 15, kinds


def test_capd_py_and_upstream_agree_on_every_input(outcomes: list[Outcome]) -> None:
    differ = [o for o in outcomes if not o.capd_py.same(o.upstream)]
    assert not differ, report(differ, 0, SEED)
