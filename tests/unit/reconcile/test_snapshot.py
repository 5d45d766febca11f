"""reconcile/snapshot.py: the manifest and what a restore in place refuses, with the message it gives."""

from __future__ import annotations

import pytest

from capd_py.reconcile import snapshot as sn

pytestmark = pytest.mark.unit

NODE = "capd-py/node:v1.34.4"
LB_IMG = "kindest/haproxy:v20230606-42a2262b"
M = sn.manifest("default", "c1", "s1", "2026-12-05T02:00:00Z", [
    sn.Saved("c1-control-plane-a", "control-plane", NODE, "sha256:node", ("/", "/var")),
    sn.Saved("c1-lb", "load-balancer", LB_IMG, "sha256:lb", ("/",)),
], 123)
FOLDERS = {"c1-control-plane-a/rootfs", "c1-control-plane-a/vol_var", "c1-lb/rootfs"}
NOW: dict[str, str | None] = {"c1-control-plane-a": NODE, "c1-lb": LB_IMG}
IDS: dict[str, str | None] = {NODE: "sha256:node", LB_IMG: "sha256:lb"}


def test_round_trip_and_folders() -> None:
    assert [c.name for c in sn.saved(M)] == ["c1-control-plane-a", "c1-lb"]
    assert sn.saved(M)[0].mounts == ("/", "/var")
    assert (sn.folder_of("/"), sn.folder_of("/var"), sn.folder_of("/var/lib/x")) == ("rootfs", "vol_var",
                                                                                      "vol_var_lib_x")


@pytest.mark.parametrize(("folders", "now", "ids", "want"), [
    (FOLDERS, NOW, IDS, []),
    (FOLDERS - {"c1-control-plane-a/vol_var"}, NOW, IDS,
     ["the snapshot lacks c1-control-plane-a's /var (incomplete: delete it)"]),
    (FOLDERS, {"c1-lb": LB_IMG}, IDS,
     ["container c1-control-plane-a is gone: a restore in place needs the snapshot's containers (the cluster was "
      "deleted or that machine replaced since)"]),
    (FOLDERS, NOW, {**IDS, NODE: None}, ["image capd-py/node:v1.34.4 is gone: build it again (make images) before "
                                         "restoring"]),
    (FOLDERS, NOW, {**IDS, NODE: "sha256:other"},
     ["image capd-py/node:v1.34.4 is now sha256:other, the snapshot was taken on sha256:node"]),
    (FOLDERS, {**NOW, "c1-md-0-new": NODE}, IDS,
     ["containers made after the snapshot: c1-md-0-new (scale the cluster back to the snapshot's machines first)"]),
], ids=["ok", "incomplete", "container-gone", "image-gone", "image-changed", "extra-container"])
def test_restore_problems(folders: set[str], now: dict[str, str | None], ids: dict[str, str | None],
                          want: list[str]) -> None:
    assert sn.restore_problems(M, folders, now, ids) == want


def test_format_version_and_names() -> None:
    assert sn.restore_problems({**M, "version": 9}, FOLDERS, NOW, IDS) == [
        "snapshot format version 9, this capd-py reads 1"]
    assert sn.name_problem("before-upgrade.1") is None
    assert sn.name_problem("Bad/Name") is not None and sn.name_problem("-x") is not None
    assert (sn.human(512), sn.human(3 * 1024 ** 2), sn.human(5 * 1024 ** 3)) == ("512 B", "3.0 MiB", "5.0 GiB")
