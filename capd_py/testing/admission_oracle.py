"""Upstream's admission as the oracle (issue 42 item 1): the same input goes to an API server set up as `capd-py
init` sets one up and to one with upstream's CRDs and upstream's four managers serving their webhooks (`make
upstream`); the two verdicts must agree: accepted or refused, the HTTP code and the field path of every cause of a
refusal, and for an accepted object what defaulting made of it (spec, labels, annotations).

Both API servers are the same kube-apiserver build, so a difference is capd-py's (its CRDs, CEL rules or
webhooks) or upstream's webhooks reading state capd-py's do not read. The inputs come from
capd_py.testing.admission_inputs (seeded mutations of upstream's own templates).

    python -m capd_py.testing.admission_oracle --inputs 5000 --seed 1 --report /tmp/admission.md

runs the comparison outside pytest (`make conformance`; docs/conformance.md: once no disagreement is left, a fixed
sample joins `make test`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capd_py.api import conditions, gvk
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.conversion_webhook import crds_serving_v1beta1, webhook_conversion
from capd_py.reconcile.servingcert import host_mode_url, new_webhook_ca
from capd_py.testing import upstream_managers as um
from capd_py.testing.admission_inputs import Case, cases, fixtures
from capd_py.testing.conversion import of
from capd_py.testing.envtest import EnvTest, free_port, started_with_crds
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import NoWorkloads, operator_in_thread

Obj = dict[str, Any]

# the managers whose webhooks cover the kinds capd-py admits (the in-memory role is CAPD's manager again)
ROLES = ("core", "kubeadm-bootstrap", "kubeadm-control-plane", "docker")
NAMESPACE = "oracle"


@contextlib.contextmanager
def upstream_plane(roles: Sequence[str] = ROLES) -> Iterator[EnvTest]:
    """An API server with upstream's CRDs, its managers running and their webhook configurations installed. CAPD's
    manager gets a docker socket that does not exist: its controllers must not create containers here."""
    why = um.missing()
    if why:
        raise um.UpstreamManagerError(why)
    with EnvTest() as env, contextlib.ExitStack() as stack:
        k = env.kube()
        try:
            asyncio.run(um.serve(k, env.kubeconfig_path, stack, roles,
                                 {"docker": {"DOCKER_HOST": f"unix://{env.dir}/no-docker.sock"}}))
        finally:
            k.close()
        yield env


@dataclass(frozen=True)
class Verdict:
    """What an API server made of one input."""
    allowed: bool
    code: int = 0                    # the refusal's HTTP status
    fields: tuple[str, ...] = ()     # the refusal's causes' field paths, sorted, without duplicates
    admitted: str = ""               # JSON of spec, labels and annotations after defaulting (allowed only)
    message: str = ""

    def same(self, other: Verdict) -> bool:
        return (self.allowed, self.code, self.fields, self.admitted) == \
            (other.allowed, other.code, other.fields, other.admitted)

    def brief(self) -> str:
        if self.allowed:
            return "accepted"
        return f"refused {self.code} [{', '.join(self.fields)}]: {self.message[:300]}"


def _admitted(obj: Obj) -> str:
    md = obj.get("metadata") or {}
    return json.dumps({"spec": obj.get("spec"), "labels": md.get("labels") or {},
                       "annotations": md.get("annotations") or {}}, sort_keys=True)


# The API server's note when CEL rules were skipped because the schema already failed ("some validation rules were
# not checked because the object was invalid"): a cause without a field, there where a CRD has CEL rules at all (capd-py
# expresses some upstream webhook checks in CEL). Not a field's cause: left out of the comparison.
NOT_A_FIELD = ("", "<nil>")


def _refused(e: KubeError) -> Verdict:
    causes = ((e.body.get("details") or {}).get("causes") or []) if isinstance(e.body, dict) else []
    fields = tuple(sorted({str(c.get("field", "")) for c in causes if isinstance(c, dict)} - set(NOT_A_FIELD)))
    return Verdict(False, e.status, fields, message=e.message)


DRY = [("dryRun", "All"), ("fieldValidation", "Strict")]


async def verdict(kube: Kube, case: Case) -> Verdict:
    """Send `case` as a dry-run create, or (with a base) create the base and send the case as a dry-run update
    of it (re-read and retried when a controller wrote the base in between)."""
    g = of(case.obj)
    ns, name = case.obj["metadata"].get("namespace"), case.obj["metadata"]["name"]
    try:
        if case.base is None:
            out = await kube.acall("POST", g.path(ns), body=case.obj, query=DRY)
            return Verdict(True, admitted=_admitted(out))
        for attempt in range(5):
            current = await kube.get(g, ns, name)
            if current is None:
                current = await kube.create(g, copy.deepcopy(case.base))
            update = copy.deepcopy(case.obj)
            update["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                out = await kube.acall("PUT", g.path(ns, name), body=update, query=DRY)
                return Verdict(True, admitted=_admitted(out))
            except KubeError as e:
                if not e.conflict or attempt == 4:
                    raise
    except KubeError as e:
        return _refused(e)
    raise AssertionError("unreachable")


async def create_fixtures(kube: Kube, objs: list[Obj]) -> dict[str, str]:
    """The namespace and the objects every case may refer to (ClusterClasses and their templates); returns the
    refused ones (kind/name -> why: e.g. an ignition template while its feature gate is off, on both sides)."""
    with contextlib.suppress(KubeError):
        await kube.create(gvk.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    refused = {}
    for o in objs:
        try:
            await kube.create(of(o), copy.deepcopy(o))
        except KubeError as e:
            if e.status != 409:
                refused[f"{o['kind']}/{o['metadata']['name']}"] = str(e)
    return refused


@dataclass(frozen=True)
class Outcome:
    case: Case
    capd_py: Verdict
    upstream: Verdict


async def compare(capd_py: Kube, upstream: Kube, todo: Sequence[Case], parallel: int = 8) -> list[Outcome]:
    """Both verdicts of every case, `parallel` cases in flight."""
    sem = asyncio.Semaphore(parallel)

    async def one(c: Case) -> Outcome:
        async with sem:
            a, b = await asyncio.gather(verdict(capd_py, c), verdict(upstream, c))
            return Outcome(c, a, b)
    return list(await asyncio.gather(*(one(c) for c in todo)))


async def classes_reconciled(kube: Kube, timeout: float = 60) -> None:
    """Upstream's Cluster webhook checks a Cluster against its ClusterClass only once the class is reconciled
    (observedGeneration, VariablesReady), and waits 2 s for that on every Cluster: wait here once instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        waiting = [c["metadata"]["name"] for c in await kube.list(gvk.CLUSTER_CLASS, NAMESPACE)
                   if (c.get("status") or {}).get("observedGeneration") != c["metadata"].get("generation")
                   or not conditions.is_true(c, "VariablesReady")]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"ClusterClasses not reconciled by upstream's core in {timeout:.0f}s: {waiting}")
        await asyncio.sleep(0.5)


@contextlib.contextmanager
def capd_py_plane() -> Iterator[EnvTest]:
    """An API server with capd-py's CRDs and webhook configurations as `capd-py init` installs them; its controllers
    (run by `run`) serve the webhooks, as in `capd-py init`."""
    url = host_mode_url("127.0.0.1", free_port())
    ca = new_webhook_ca()  # replaced by the controllers' own (they keep every caBundle current)
    with started_with_crds(crds_serving_v1beta1(webhook_conversion(ca.cert, url=url)),
                           admission_webhook.configurations(ca.cert, url=url)) as env:
        yield env


@contextlib.contextmanager
def planes() -> Iterator[tuple[EnvTest, EnvTest]]:
    """capd-py's plane and upstream's (its managers running)."""
    with capd_py_plane() as mine, upstream_plane() as theirs:
        yield mine, theirs


async def webhooks_answer(kube: Kube, timeout: float = 60) -> None:
    probe = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
             "metadata": {"name": "probe", "namespace": "default"},
             "spec": {"clusterName": "c", "selector": {}}}
    deadline = time.monotonic() + timeout
    while True:
        try:
            await kube.acall("POST", gvk.MACHINE_HEALTH_CHECK.path("default"), body=probe, query=DRY)
            return
        except KubeError as e:
            if e.status != 500 and e.status < 500:
                return  # answered (a refusal is an answer)
            if time.monotonic() > deadline:
                raise AssertionError(f"capd-py's webhooks did not answer in {timeout:.0f}s: {e}") from e
        await asyncio.sleep(0.5)


def run(mine: EnvTest, theirs: EnvTest, todo: Sequence[Case]) -> list[Outcome]:
    """Both verdicts of every case, with capd-py's controllers running on its plane (serving its webhooks, as
    `capd-py init` runs them) as upstream's managers run on theirs: what a webhook reads, e.g. a ClusterClass's
    status, is then written the same way on both. The fixtures are created on both first; each side must refuse
    the same ones."""
    async def go() -> list[Outcome]:
        a, b = mine.kube(), theirs.kube()
        try:
            async with operator_in_thread(str(mine.kubeconfig_path), FakeRuntime(), NoWorkloads(a)):
                await webhooks_answer(a)
                objs = fixtures(NAMESPACE)
                refused = [await create_fixtures(a, objs), await create_fixtures(b, objs)]
                assert refused[0].keys() == refused[1].keys(), \
                    f"fixtures refused: capd-py {refused[0]}, upstream {refused[1]}"
                await asyncio.gather(classes_reconciled(a), classes_reconciled(b))
                return await compare(a, b, todo)
        finally:
            a.close()
            b.close()
    return asyncio.run(go())


def report(outcomes: Sequence[Outcome], seconds: float, seed: int) -> str:
    differ = [o for o in outcomes if not o.capd_py.same(o.upstream)]
    refused = sum(not o.upstream.allowed for o in outcomes)
    lines = [f"# Admission: capd-py against upstream {CLUSTER_API_VERSION}'s webhooks and CRDs", "",
             f"{len(outcomes)} inputs (seed {seed}; upstream refused {refused}), {len(differ)} disagreements, "
             f"{seconds:.0f} s.", ""]
    for o in differ:
        lines += [f"- `{o.case.name}`", f"  - capd-py:  {o.capd_py.brief()}", f"  - upstream: {o.upstream.brief()}"]
        if o.capd_py.allowed and o.upstream.allowed:
            lines.append(f"  - capd-py admitted {o.capd_py.admitted}\n  - upstream admitted {o.upstream.admitted}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m capd_py.testing.admission_oracle", description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=5000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--report", type=Path)
    a = p.parse_args(argv)
    todo = cases(a.seed, a.inputs, NAMESPACE)
    start = time.monotonic()
    with planes() as (mine, theirs):
        print(f" • {len(todo)} inputs to both planes", file=sys.stderr)
        outcomes = run(mine, theirs, todo)
    text = report(outcomes, time.monotonic() - start, a.seed)
    if a.report:
        a.report.write_text(text)
    sys.stdout.write(text)
    return 1 if any(not o.capd_py.same(o.upstream) for o in outcomes) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
