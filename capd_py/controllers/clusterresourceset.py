"""ClusterResourceSet and ClusterResourceSetBinding controllers (thin I/O around
capd_py.reconcile.clusterresourceset).

Watches (upstream's): a ClusterResourceSet is reconciled when it changes, when a Cluster it selects changes
(a new Cluster, one that starts matching, one whose control plane became initialized) and when a ConfigMap
or Secret it lists changes (Reconcile strategy re-applies on a new hash). Bindings of Clusters that are
gone are deleted by controllers/clusterresourcesetbinding.py.

Objects go to the workload cluster through `ctx.workload`: with ApplyOnce each object is created (one that
exists already is left alone), with Reconcile it is server-side applied (field manager capd-py). Before a
resource's objects are sent, each is resolved through discovery and validated with a server dry run, so a
resource that cannot apply creates nothing (objects whose kind or namespace the resource itself creates
are checked when they are sent).
"""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_RESOURCE_SET,
    CLUSTER_RESOURCE_SET_BINDING,
    CONFIG_MAP,
    GVK,
    SECRET,
)
from capd_py.api.labels import FIELD_MANAGER, FINALIZER_CLUSTER_RESOURCE_SET
from capd_py.api.selectors import selector_string
from capd_py.controllers import lifecycle, skeleton
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Subject
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError, WorkloadError
from capd_py.kube.discovery import Discovery
from capd_py.kube.transport import Unreachable
from capd_py.reconcile import clusterresourceset as rcrs

RETRY = 10.0  # seconds before trying a failed apply / an unreachable workload cluster again
_GVK_OF_KIND = {"ConfigMap": CONFIG_MAP, "Secret": SECRET}


# --- watches ---------------------------------------------------------------------------------------------

def cluster_to_crs(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    ns = obj["metadata"].get("namespace") or ""
    return [(ns, c["metadata"]["name"]) for c in cache.list(CLUSTER_RESOURCE_SET, ns) if rcrs.selects(c, obj)]


def resource_to_crs(kind: str) -> Any:
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        ns = obj["metadata"].get("namespace") or ""
        name = obj["metadata"]["name"]
        return [(ns, c["metadata"]["name"]) for c in cache.list(CLUSTER_RESOURCE_SET, ns)
                if rcrs.uses(c, kind, name)]
    return m


# --- ClusterResourceSet ----------------------------------------------------------------------------------

async def _reconcile(ctx: Ctx, sub: Subject) -> skeleton.Outcome:
    kube, crs = ctx.kube, sub.obj
    namespace, name = sub.namespace, sub.name

    found: dict[tuple[str, str], dict[str, Any] | None] = {}
    for kind, rname in rcrs.refs(crs):
        g = _GVK_OF_KIND.get(kind)
        found[(kind, rname)] = await kube.get(g, namespace, rname) if g else None
    resources = rcrs.load_resources(crs, found)
    out = rcrs.Outcome(resources=resources)
    bad = rcrs.problems(resources)
    for r in resources:
        obj = found.get(r.key)
        if obj is not None and r.reason != rcrs.R_WRONG_SECRET_TYPE:
            # as upstream: the ClusterResourceSet owns the resources it lists
            await lifecycle.ensure_metadata(kube, _GVK_OF_KIND[r.kind], obj,
                                            owner=contract.owner_ref(crs, controller=False))

    requeue: float | None = None
    # filtered in the cache before copying: a namespace may hold hundreds of Clusters, one CRS each
    sel = contract.dig(crs, "spec", "clusterSelector") or {}
    only_labels = not sel.get("matchExpressions")
    candidates = await kube.list(CLUSTER, namespace, labels=sel.get("matchLabels") if only_labels else None,
                                 selector=None if only_labels else selector_string(sel))
    clusters = rcrs.matching_clusters(crs, candidates)
    out.clusters = [c["metadata"]["name"] for c in clusters]
    if not bad:
        for cluster in clusters:
            if not rcrs.control_plane_initialized(cluster):
                out.waiting.append(cluster["metadata"]["name"])  # the Cluster's update brings us back
                continue
            if not await _apply_to_cluster(ctx, crs, cluster, resources, out):
                requeue = RETRY
    else:
        ctx.log.info("clusterresourceset %s/%s: %s", namespace, name, "; ".join(r.problem or "" for r in bad))

    status = rcrs.compute_status(crs, out)
    old = cond.get(crs, rcrs.RESOURCES_APPLIED)
    new = next(c for c in status["conditions"] if c["type"] == rcrs.RESOURCES_APPLIED)
    if new["status"] == cond.FALSE and (bad or out.failed) and (old or {}).get("message") != new["message"]:
        await events.record(kube, crs, new["reason"], new["message"])
    return skeleton.Outcome(status=status, requeue_after=requeue)


async def _apply_to_cluster(ctx: Ctx, crs: dict[str, Any], cluster: dict[str, Any],
                            resources: list[rcrs.Resource], out: rcrs.Outcome) -> bool:
    """Apply what the binding says is due and record it there. False when something has to be retried."""
    kube = ctx.kube
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    binding = await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, cname)
    due = rcrs.to_apply(crs, binding, resources)
    results: list[rcrs.Applied] = []
    ok = True
    if due:
        try:
            wl = await ctx.workload.get(ns, cname)
        except WorkloadError as e:  # a broken kubeconfig: report, retry
            wl, why = None, f"cannot build a client: {e.cause if isinstance(e, Unreachable) else e}"
        else:
            why = "its kubeconfig Secret does not exist yet"
        if wl is None:
            out.unreachable[cname] = why
            return False
        disc = Discovery(wl)
        strat = rcrs.strategy(crs)
        for r in due:
            try:
                err = await _apply_resource(wl, disc, strat, r)
            except KubeError as e:
                err = f"{e.status} {e.reason}: {e.message}"
            except Unreachable as e:  # connection refused / reset: the API server is not reachable
                out.unreachable[cname] = rcrs.one_line(str(e))
                ok = False
                break
            if err:
                out.failed.append(f"Cluster {cname}: {r.kind} {r.name}: {err}")
                ctx.log.warning("clusterresourceset %s/%s: %s %s to Cluster %s: %s", ns, crs["metadata"]["name"],
                                r.kind, r.name, cname, err)
                ok = False
            results.append(rcrs.Applied(r.kind, r.name, r.hash, applied=not err, time=cond.now_iso(), error=err))
    if not results and binding is None:
        return ok
    desired = rcrs.binding_after(binding, crs, cluster, results)
    if not rcrs.binding_changed(binding, desired):
        return ok
    if binding is None:
        try:
            await kube.create(CLUSTER_RESOURCE_SET_BINDING, {"apiVersion": CLUSTER_RESOURCE_SET_BINDING.api_version,
                                                             "kind": CLUSTER_RESOURCE_SET_BINDING.kind, **desired})
            return ok
        except KubeError as e:
            if e.status != 409:
                raise
            # another ClusterResourceSet created it meanwhile: add to theirs
            binding = await getattr(kube, "live", kube).get(CLUSTER_RESOURCE_SET_BINDING, ns, cname)
            if binding is None:
                raise
            desired = rcrs.binding_after(binding, crs, cluster, results)
    await kube.merge_patch(CLUSTER_RESOURCE_SET_BINDING, ns, cname, {
        "metadata": {**desired["metadata"], "resourceVersion": binding["metadata"]["resourceVersion"]},
        "spec": {"bindings": desired["spec"]["bindings"]}})
    return ok


async def _apply_resource(wl: Kube, disc: Discovery, strat: str, r: rcrs.Resource) -> str:
    """Send one resource's objects; "" on success, else what went wrong. Nothing is sent unless every
    object resolves and passes a dry run (those depending on the resource's own CRDs / Namespaces aside)."""
    planned: list[tuple[dict[str, Any], GVK | None]] = []
    later = rcrs.defined_kinds(r.objects)
    for o in r.objects:
        g = await disc.resolve(o["apiVersion"], o["kind"])
        if g is None and (rcrs.group_of(o["apiVersion"]), o["kind"]) not in later:
            return f"the workload cluster does not serve {o['kind']} in {o['apiVersion']}"
        planned.append((rcrs.prepare(o, g.namespaced) if g else o, g))
    batch = [o for o, _ in planned]
    for o, g in planned:
        if g is not None and rcrs.checkable(o, batch):
            err = await _send(wl, g, o, strat, dry_run=True)
            if err:
                return err
    for o, g in planned:
        if g is None:  # its CRD came with this resource: discover it again now
            disc = Discovery(wl)
            g = await disc.resolve(o["apiVersion"], o["kind"])
            if g is None:
                return f"the workload cluster does not serve {o['kind']} in {o['apiVersion']} yet"
            o = rcrs.prepare(o, g.namespaced)
        err = await _send(wl, g, o, strat, dry_run=False)
        if err:
            return err
    return ""


async def _send(wl: Kube, g: GVK, o: dict[str, Any], strat: str, dry_run: bool) -> str:
    md = o["metadata"]
    ref = f"{o['kind']} {md.get('namespace') + '/' if md.get('namespace') else ''}{md['name']}"
    dry = [("dryRun", "All")] if dry_run else []
    try:
        if strat == rcrs.RECONCILE:
            await wl.acall("PATCH", g.path(md.get("namespace"), md["name"]), body=o,
                           query=[("fieldManager", FIELD_MANAGER), ("force", "true"), *dry],
                           content_type="application/apply-patch+yaml")
        else:
            await wl.acall("POST", g.path(md.get("namespace")), body=o,
                           query=[("fieldManager", FIELD_MANAGER), *dry])
    except KubeError as e:
        if strat != rcrs.RECONCILE and e.status == 409 and e.reason == "AlreadyExists":
            return ""  # ApplyOnce: an object that exists is left as it is
        return f"{ref}: {e.status} {e.reason}: {e.message}"
    return ""


async def _delete(ctx: Ctx, sub: Subject) -> skeleton.Outcome:
    """Remove the ClusterResourceSet from every binding (deleting bindings left empty), never the objects it
    applied; then let it go."""
    kube = ctx.kube
    md = sub.obj["metadata"]
    for b in await kube.list(CLUSTER_RESOURCE_SET_BINDING, md["namespace"]):
        if rcrs.binding_entry(b, md["name"]) is None and not any(
                o.get("kind") == "ClusterResourceSet" and o.get("name") == md["name"]
                for o in b["metadata"].get("ownerReferences") or []):
            continue
        rest = rcrs.without_crs(b, md["name"])
        if rest is None:
            await kube.delete(CLUSTER_RESOURCE_SET_BINDING, md["namespace"], b["metadata"]["name"],
                              uid=b["metadata"].get("uid"))
        else:
            rest["metadata"]["resourceVersion"] = b["metadata"]["resourceVersion"]
            await kube.merge_patch(CLUSTER_RESOURCE_SET_BINDING, md["namespace"], b["metadata"]["name"], rest)
    return skeleton.Outcome(done=True)


# paused first, before a deletion too, as upstream: a paused set is left alone whatever happens to it (`move`
# strips a paused set's finalizer before deleting it at the source; nothing may clean up its bindings there).
# It belongs to no one Cluster (it selects them).
KIND = skeleton.Kind(CLUSTER_RESOURCE_SET, reconcile=_reconcile, delete=_delete,
                     finalizer=FINALIZER_CLUSTER_RESOURCE_SET, cluster_name=None)
reconcile = skeleton.reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=CLUSTER_RESOURCE_SET, reconcile=reconcile, watches=[
        (CLUSTER, cluster_to_crs), (CONFIG_MAP, resource_to_crs("ConfigMap")), (SECRET, resource_to_crs("Secret")),
    ])
