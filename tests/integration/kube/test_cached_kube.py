"""CachedKube against a real kube-apiserver: reads from the Store, own writes visible at once, paging."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.gvk import CONFIG_MAP, MACHINE_SET
from capd_py.kube.cache import Store
from capd_py.kube.cached import CachedKube
from capd_py.kube.client import Kube

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


def cm(ns: str, name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"k": "v"}}


async def test_list_pages_through_everything(kube: Kube, namespace: str) -> None:
    for i in range(7):
        await kube.create(CONFIG_MAP, cm(namespace, f"p{i}", page="yes"))
    items, rv = await kube.list_with_version(CONFIG_MAP, namespace, labels={"page": "yes"}, page=3)
    assert sorted(o["metadata"]["name"] for o in items) == [f"p{i}" for i in range(7)]
    assert rv and int(rv) > 0
    assert all(o["kind"] == "ConfigMap" for o in items)


async def test_reads_come_from_the_store_and_writes_land_in_it(kube: Kube, namespace: str) -> None:
    store = Store()
    ck = CachedKube(kube, store)
    items, rv = await kube.list_with_version(CONFIG_MAP, namespace)
    store.replace(CONFIG_MAP, items, rv)

    created = await ck.create(CONFIG_MAP, cm(namespace, "a", app="x"))
    # visible to a list right away, without any watch event: no duplicate create on the next pass
    assert [o["metadata"]["name"] for o in await ck.list(CONFIG_MAP, namespace, labels={"app": "x"})] == ["a"]
    api_reads = sum(ck.api_reads.values())

    patched = await ck.merge_patch(CONFIG_MAP, namespace, "a", {"data": {"k": "v2"}})
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    got = await ck.get(CONFIG_MAP, namespace, "a")
    assert got is not None and got["data"]["k"] == "v2"
    # a watch event that was in flight before the patch cannot roll the cache back
    store.observe(CONFIG_MAP, created)
    got = await ck.get(CONFIG_MAP, namespace, "a")
    assert got is not None and got["data"]["k"] == "v2"
    assert sum(ck.api_reads.values()) == api_reads  # served without touching the API server

    # callers get copies: mutating one does not change the cache
    got["data"]["k"] = "mutated"
    again = await ck.get(CONFIG_MAP, namespace, "a")
    assert again is not None and again["data"]["k"] == "v2"

    # a kind the store does not serve goes to the API server
    assert await ck.list(MACHINE_SET, namespace) == []
    assert ck.api_reads["MachineSet"] == 1


async def test_delete_held_by_a_finalizer_and_gone(kube: Kube, namespace: str) -> None:
    store = Store()
    ck = CachedKube(kube, store)
    store.replace(CONFIG_MAP, [], None)
    held = cm(namespace, "held")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    await ck.create(CONFIG_MAP, held)
    await ck.create(CONFIG_MAP, cm(namespace, "free"))

    await ck.delete(CONFIG_MAP, namespace, "held")
    copy = await ck.get(CONFIG_MAP, namespace, "held")
    assert copy is not None and copy["metadata"].get("deletionTimestamp")  # the cache knows it is going
    await ck.delete(CONFIG_MAP, namespace, "free")
    assert await ck.get(CONFIG_MAP, namespace, "free") is None

    # a write answered 404 evicts a copy whose DELETED event was missed
    store.observe(CONFIG_MAP, {**cm(namespace, "ghost"), "metadata": {**cm(namespace, "ghost")["metadata"],
                                                                        "resourceVersion": "1"}})
    with pytest.raises(Exception) as e:
        await ck.merge_patch(CONFIG_MAP, namespace, "ghost", {"data": {"k": "x"}})
    assert getattr(e.value, "not_found", False)
    assert await ck.get(CONFIG_MAP, namespace, "ghost") is None
    await kube.merge_patch(CONFIG_MAP, namespace, "held", {"metadata": {"finalizers": None}})
