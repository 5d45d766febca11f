#!/usr/bin/env python3
"""A minimal Cluster API provider: infrastructure (MinimalCluster, MinimalMachine) and control plane
(MinimalControlPlane), written only against the Cluster API contract (v1beta2).

It is a *pretend* provider, like upstream's in-memory provider: nothing is created anywhere, it allocates fake
addresses and reports what a real provider would report once its cloud had done the work. It depends on
nothing but the `kubernetes` client package, and knows nothing of the core that drives it (capd-py or upstream
Cluster API): it reads Clusters and Machines, and writes only its own objects.

What it does, per the contract (docs/write-your-own-provider.md walks through each rule):

- MinimalCluster (InfraCluster): waits for its owner Cluster, adds its finalizer, sets spec.controlPlaneEndpoint
  (a fake load balancer address), status.failureDomains, status.initialization.provisioned and a Ready condition.
- MinimalMachine (InfraMachine): waits for its owner Machine, for the Cluster's infrastructure to be provisioned
  and for the Machine's bootstrap data secret; adds its finalizer; sets spec.providerID, status.addresses (a
  fake IP from the cluster's subnet), status.initialization.provisioned and a Ready condition.
- MinimalControlPlane (ControlPlane, without Machines): waits for its owner Cluster and the Cluster's control
  plane endpoint, adds its finalizer; reports status.initialization.controlPlaneInitialized, the replica
  counters, status.version / status.versions and an Available condition.
- Deleted objects: the provider "deprovisions" (takes --deprovision-seconds, as a cloud would), then removes
  its finalizer. The core deletes workers, then the control plane, then the infrastructure, and waits for each.
- Paused: nothing is done for an object whose Cluster has spec.paused or which is annotated
  cluster.x-k8s.io/paused.

Run it with a kubeconfig for the management cluster:

    python minimal_provider.py [--kubeconfig PATH] [--namespace NS] [--deprovision-seconds 2]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import ipaddress
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

log = logging.getLogger("minimal-provider")

FINALIZER = "minimal.example.com/finalizer"
PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
CAPI_GROUP = "cluster.x-k8s.io"
API_SERVER_PORT = 6443
FAILURE_DOMAINS = [{"name": "zone-a", "controlPlane": True}, {"name": "zone-b", "controlPlane": True},
                   {"name": "zone-c", "controlPlane": False}]
Obj = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str


MINIMAL_CLUSTER = Kind("infrastructure.minimal.example.com", "v1alpha1", "MinimalCluster", "minimalclusters")
MINIMAL_MACHINE = Kind("infrastructure.minimal.example.com", "v1alpha1", "MinimalMachine", "minimalmachines")
MINIMAL_CONTROL_PLANE = Kind("controlplane.minimal.example.com", "v1alpha1", "MinimalControlPlane",
                             "minimalcontrolplanes")
# The Cluster API objects the provider reads (never writes).
CLUSTER = Kind(CAPI_GROUP, "v1beta2", "Cluster", "clusters")
MACHINE = Kind(CAPI_GROUP, "v1beta2", "Machine", "machines")
OWN_KINDS = (MINIMAL_CLUSTER, MINIMAL_MACHINE, MINIMAL_CONTROL_PLANE)
Key = tuple[Kind, str, str]  # kind, namespace, name


# --- small helpers -----------------------------------------------------------------------------------------

def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(obj: Obj, ctype: str, status: bool, reason: str, message: str = "") -> list[Obj]:
    """obj's conditions with `ctype` set; its lastTransitionTime is kept unless the status changes."""
    conds = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
    old = next((c for c in conds if c.get("type") == ctype), None)
    new = {"type": ctype, "status": "True" if status else "False", "reason": reason, "message": message,
           "observedGeneration": obj["metadata"].get("generation", 1),
           "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == (
               "True" if status else "False") else now()}
    return [new if c is old else c for c in conds] if old else [*conds, new]


def owner(obj: Obj, kind: str) -> str | None:
    """The name of obj's Cluster API owner of this kind (the core sets these owner references)."""
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == kind and ref.get("apiVersion", "").startswith(CAPI_GROUP + "/"):
            return str(ref["name"])
    return None


def paused(cluster: Obj, obj: Obj) -> bool:
    return bool((cluster.get("spec") or {}).get("paused")) or \
        PAUSED_ANNOTATION in (obj["metadata"].get("annotations") or {})


def subnet(namespace: str, cluster: str) -> ipaddress.IPv4Network:
    """The pretend /24 of a cluster: 10.x.y.0/24 from a hash of its name."""
    h = hashlib.sha256(f"{namespace}/{cluster}".encode()).digest()
    return ipaddress.IPv4Network(f"10.{h[0]}.{h[1]}.0/24")


def internal_ip(obj: Obj) -> str | None:
    for a in (obj.get("status") or {}).get("addresses") or []:
        if a.get("type") == "InternalIP":
            return str(a["address"])
    return None


# --- a tiny controller runtime: watches feed a cache and a work queue ---------------------------------------

class WorkQueue:
    """Keys to reconcile, each at most once, each at its due time."""

    def __init__(self) -> None:
        self._due: dict[Key, float] = {}
        self._cv = threading.Condition()

    def add(self, key: Key, after: float = 0.0) -> None:
        with self._cv:
            due = time.monotonic() + after
            if key not in self._due or due < self._due[key]:
                self._due[key] = due
                self._cv.notify()

    def get(self) -> Key:
        with self._cv:
            while True:
                if self._due:
                    key, due = min(self._due.items(), key=lambda kv: kv[1])
                    wait = due - time.monotonic()
                    if wait <= 0:
                        del self._due[key]
                        return key
                    self._cv.wait(wait)
                else:
                    self._cv.wait()


class Provider:
    def __init__(self, namespace: str | None, deprovision_seconds: float):
        self.api = client.CustomObjectsApi()
        self.core = client.CoreV1Api()
        self.namespace = namespace
        self.deprovision_seconds = deprovision_seconds
        self.queue = WorkQueue()
        self.cache: dict[Key, Obj] = {}  # every watched object, as last seen
        self.lock = threading.Lock()
        self.deleting_since: dict[Key, float] = {}

    # -- reading and writing objects -----------------------------------------------------------------------
    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        try:
            return cast(Obj, self.api.get_namespaced_custom_object(kind.group, kind.version, namespace, kind.plural,
                                                                   name))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def patch(self, kind: Kind, obj: Obj, body: Obj, status: bool = False) -> Obj:
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        fn = self.api.patch_namespaced_custom_object_status if status else self.api.patch_namespaced_custom_object
        out = cast(Obj, fn(kind.group, kind.version, ns, kind.plural, name, body))  # a JSON merge patch
        self.remember(kind, out)
        return out

    def set_status(self, kind: Kind, obj: Obj, status: Obj) -> Obj:
        """Write `status` fields that differ from obj's: a stable object is never written."""
        current = obj.get("status") or {}
        if all(current.get(k) == v for k, v in status.items()):
            return obj
        return self.patch(kind, obj, {"status": status}, status=True)

    def add_finalizer(self, kind: Kind, obj: Obj) -> Obj:
        fins = obj["metadata"].get("finalizers") or []
        if FINALIZER in fins:
            return obj
        # resourceVersion makes the patch fail (409) rather than overwrite someone else's finalizers
        return self.patch(kind, obj, {"metadata": {"finalizers": [*fins, FINALIZER],
                                                   "resourceVersion": obj["metadata"]["resourceVersion"]}})

    def remove_finalizer(self, kind: Kind, obj: Obj) -> None:
        fins = obj["metadata"].get("finalizers") or []
        if FINALIZER in fins:
            self.patch(kind, obj, {"metadata": {"finalizers": [f for f in fins if f != FINALIZER],
                                                "resourceVersion": obj["metadata"]["resourceVersion"]}})

    def remember(self, kind: Kind, obj: Obj, deleted: bool = False) -> None:
        key = (kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        with self.lock:
            if deleted:
                self.cache.pop(key, None)
            # never replace what a patch returned with an older watch event (resourceVersions are etcd revisions)
            elif int(obj["metadata"]["resourceVersion"]) >= int(
                    (self.cache.get(key) or {"metadata": {"resourceVersion": "0"}})["metadata"]["resourceVersion"]):
                self.cache[key] = obj

    def cached(self, kind: Kind, namespace: str) -> list[Obj]:
        with self.lock:
            return [o for (k, ns, _), o in self.cache.items() if k == kind and ns == namespace]

    # -- watches ---------------------------------------------------------------------------------------------
    def _list_fn(self, kind: Kind) -> tuple[Any, tuple[Any, ...]]:
        if self.namespace:
            return self.api.list_namespaced_custom_object, (kind.group, kind.version, self.namespace, kind.plural)
        return self.api.list_cluster_custom_object, (kind.group, kind.version, kind.plural)

    def informer(self, kind: Kind) -> None:
        """List, then watch `kind` forever; every change goes through on_event."""
        fn, args = self._list_fn(kind)
        while True:
            try:
                listing = fn(*args)
                listed = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listing["items"]}
                with self.lock:  # deleted while we were not watching
                    gone = [o for k, o in self.cache.items() if k[0] == kind and k[1:] not in listed]
                for o in gone:
                    self.on_event(kind, "DELETED", o)
                for o in listing["items"]:
                    self.on_event(kind, "ADDED", o)
                stream = watch.Watch().stream(fn, *args, resource_version=listing["metadata"]["resourceVersion"],
                                              timeout_seconds=300, allow_watch_bookmarks=True)
                for ev in stream:
                    if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        self.on_event(kind, ev["type"], ev["object"])
            except ApiException as e:
                if e.status != 410:  # 410 Gone: the watch is too old, list again
                    log.warning("watch of %s failed: %s %s", kind.plural, e.status, e.reason)
                    time.sleep(1)
            except Exception as e:  # noqa: BLE001 - a broken connection: list and watch again
                log.warning("watch of %s failed: %s", kind.plural, e)
                time.sleep(1)

    def on_event(self, kind: Kind, etype: str, obj: Obj) -> None:
        self.remember(kind, obj, deleted=etype == "DELETED")
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        if kind in OWN_KINDS:
            self.queue.add((kind, ns, name))
        elif kind == CLUSTER:
            # a Cluster change may unblock its infrastructure, control plane and machines
            spec = obj.get("spec") or {}
            for ref, k in ((spec.get("infrastructureRef"), MINIMAL_CLUSTER),
                           (spec.get("controlPlaneRef"), MINIMAL_CONTROL_PLANE)):
                if ref and ref.get("apiGroup") == k.group and ref.get("kind") == k.kind:
                    self.queue.add((k, ns, ref["name"]))
            for m in self.cached(MINIMAL_MACHINE, ns):
                if (m["metadata"].get("labels") or {}).get(CLUSTER_NAME_LABEL) == name:
                    self.queue.add((MINIMAL_MACHINE, ns, m["metadata"]["name"]))
        elif kind == MACHINE:
            ref = (obj.get("spec") or {}).get("infrastructureRef") or {}
            if ref.get("apiGroup") == MINIMAL_MACHINE.group and ref.get("kind") == MINIMAL_MACHINE.kind:
                self.queue.add((MINIMAL_MACHINE, ns, ref["name"]))

    # -- the worker ------------------------------------------------------------------------------------------
    def work(self) -> None:
        reconcilers = {MINIMAL_CLUSTER: self.reconcile_cluster, MINIMAL_MACHINE: self.reconcile_machine,
                       MINIMAL_CONTROL_PLANE: self.reconcile_control_plane}
        while True:
            kind, ns, name = key = self.queue.get()
            try:
                obj = self.get(kind, ns, name)
                if obj is None:
                    self.deleting_since.pop(key, None)
                    continue
                if obj["metadata"].get("deletionTimestamp"):
                    after = self.deprovision(kind, obj)
                else:
                    after = reconcilers[kind](obj)
            except ApiException as e:
                after = 0.2 if e.status == 409 else 1.0  # conflict: read again and retry at once
                if e.status != 409:
                    log.warning("%s %s/%s: %s %s", kind.kind, ns, name, e.status, e.reason)
            except Exception:
                log.exception("%s %s/%s", kind.kind, ns, name)
                after = 1.0
            if after is not None:
                self.queue.add(key, after)

    def deprovision(self, kind: Kind, obj: Obj) -> float | None:
        """The object is being deleted: release what it stands for (pretend: wait), then let it go."""
        key = (kind, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if FINALIZER not in (obj["metadata"].get("finalizers") or []):
            return None
        if key not in self.deleting_since:
            log.info("%s %s/%s: deprovisioning", kind.kind, key[1], key[2])
            self.deleting_since[key] = time.monotonic()
        left = self.deprovision_seconds - (time.monotonic() - self.deleting_since[key])
        if left > 0:
            return left
        self.remove_finalizer(kind, obj)
        self.deleting_since.pop(key, None)
        log.info("%s %s/%s: deprovisioned, finalizer removed", kind.kind, key[1], key[2])
        return None

    # -- InfraCluster ----------------------------------------------------------------------------------------
    def reconcile_cluster(self, mc: Obj) -> float | None:
        ns = mc["metadata"]["namespace"]
        cluster_name = owner(mc, "Cluster")
        if cluster_name is None:
            return None  # the core sets the owner reference; its event brings us back
        cluster = self.get(CLUSTER, ns, cluster_name)
        if cluster is None or paused(cluster, mc):
            return None
        mc = self.add_finalizer(MINIMAL_CLUSTER, mc)
        # "Provision" the load balancer: its address is the control plane endpoint.
        endpoint = {"host": str(subnet(ns, cluster_name)[1]), "port": API_SERVER_PORT}
        if (mc.get("spec") or {}).get("controlPlaneEndpoint") != endpoint:
            mc = self.patch(MINIMAL_CLUSTER, mc, {"spec": {"controlPlaneEndpoint": endpoint}})
            log.info("MinimalCluster %s/%s: load balancer at %s", ns, mc["metadata"]["name"], endpoint["host"])
        self.set_status(MINIMAL_CLUSTER, mc, {
            "initialization": {"provisioned": True},
            "failureDomains": FAILURE_DOMAINS,
            "conditions": condition(mc, "Ready", True, "Provisioned")})
        return None

    # -- InfraMachine ----------------------------------------------------------------------------------------
    def reconcile_machine(self, mm: Obj) -> float | None:
        ns, name = mm["metadata"]["namespace"], mm["metadata"]["name"]
        machine_name = owner(mm, "Machine")
        if machine_name is None:
            return None
        machine = self.get(MACHINE, ns, machine_name)
        if machine is None:
            return None
        cluster_name = machine["spec"]["clusterName"]
        cluster = self.get(CLUSTER, ns, cluster_name)
        if cluster is None or paused(cluster, mm):
            return None
        mm = self.add_finalizer(MINIMAL_MACHINE, mm)
        if not ((cluster.get("status") or {}).get("initialization") or {}).get("infrastructureProvisioned"):
            self.set_status(MINIMAL_MACHINE, mm, {"conditions": condition(
                mm, "Ready", False, "WaitingForClusterInfrastructure", "Cluster infrastructure is not provisioned")})
            return None  # the Cluster's event brings us back
        secret_name = ((machine.get("spec") or {}).get("bootstrap") or {}).get("dataSecretName")
        if not secret_name or not self.secret_exists(ns, secret_name):
            self.set_status(MINIMAL_MACHINE, mm, {"conditions": condition(
                mm, "Ready", False, "WaitingForBootstrapData", "Waiting for the Machine's bootstrap data secret")})
            return 2.0 if secret_name else None  # Secrets are not watched: look again soon
        # "Create the instance": a pretend address in the cluster's subnet, the first one free.
        ip = internal_ip(mm)
        if ip is None:
            net = subnet(ns, cluster_name)
            used = {internal_ip(o) for o in self.cached(MINIMAL_MACHINE, ns) if o["metadata"]["name"] != name}
            ip = next(str(a) for a in list(net.hosts())[9:] if str(a) not in used)
        provider_id = f"minimal://{ns}/{name}"
        if (mm.get("spec") or {}).get("providerID") != provider_id:
            mm = self.patch(MINIMAL_MACHINE, mm, {"spec": {"providerID": provider_id}})
        status: Obj = {"addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                       "initialization": {"provisioned": True},
                       "conditions": condition(mm, "Ready", True, "Provisioned")}
        if machine["spec"].get("failureDomain"):
            status["failureDomain"] = machine["spec"]["failureDomain"]
        if not (mm.get("status") or {}).get("initialization", {}).get("provisioned"):
            log.info("MinimalMachine %s/%s: provisioned as %s at %s", ns, name, provider_id, ip)
        self.set_status(MINIMAL_MACHINE, mm, status)
        return None

    def secret_exists(self, namespace: str, name: str) -> bool:
        try:
            self.core.read_namespaced_secret(name, namespace)
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise

    # -- ControlPlane ----------------------------------------------------------------------------------------
    def reconcile_control_plane(self, cp: Obj) -> float | None:
        ns = cp["metadata"]["namespace"]
        cluster_name = owner(cp, "Cluster")
        if cluster_name is None:
            return None
        cluster = self.get(CLUSTER, ns, cluster_name)
        if cluster is None or paused(cluster, cp):
            return None
        cp = self.add_finalizer(MINIMAL_CONTROL_PLANE, cp)
        if not ((cluster.get("spec") or {}).get("controlPlaneEndpoint") or {}).get("host"):
            self.set_status(MINIMAL_CONTROL_PLANE, cp, {"conditions": condition(
                cp, "Available", False, "WaitingForControlPlaneEndpoint", "Cluster has no control plane endpoint")})
            return None
        # "Run" the control plane: every replica is up at the desired version at once. There are no Machines
        # (a managed control plane), so the counters are the provider's own.
        spec = cp.get("spec") or {}
        replicas, version = int(spec.get("replicas", 1)), spec["version"]
        if not ((cp.get("status") or {}).get("initialization") or {}).get("controlPlaneInitialized"):
            log.info("MinimalControlPlane %s/%s: initialized, %d replicas at %s", ns, cp["metadata"]["name"],
                     replicas, version)
        self.set_status(MINIMAL_CONTROL_PLANE, cp, {
            "initialization": {"controlPlaneInitialized": True},
            "selector": f"{CLUSTER_NAME_LABEL}={cluster_name},cluster.x-k8s.io/control-plane",
            "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
            "upToDateReplicas": replicas,
            "version": version, "versions": [{"version": version, "replicas": replicas}],
            "externalManagedControlPlane": True,
            "conditions": condition(cp, "Available", True, "Available")})
        return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="the management cluster (default: in-cluster, then ~/.kube/config)")
    p.add_argument("--namespace", help="watch only this namespace (default: all)")
    p.add_argument("--deprovision-seconds", type=float, default=2.0,
                   help="how long releasing a pretend resource takes (default: 2)")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if args.kubeconfig:
        config.load_kube_config(args.kubeconfig)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
    provider = Provider(args.namespace, args.deprovision_seconds)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    for kind in (*OWN_KINDS, CLUSTER, MACHINE):
        threading.Thread(target=provider.informer, args=(kind,), name=f"watch-{kind.plural}", daemon=True).start()
    threading.Thread(target=provider.work, name="worker", daemon=True).start()
    log.info("minimal provider running (namespace: %s)", args.namespace or "all")
    stop.wait()
    log.info("stopped")


if __name__ == "__main__":
    main()
