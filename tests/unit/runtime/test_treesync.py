"""runtime/treesync.py on real folders: a copy keeps modes, links and timestamps; a sync makes a changed folder
equal to the copy again, writing only what differs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capd_py.runtime import treesync

pytestmark = pytest.mark.unit


def _tree(root: Path) -> dict[str, tuple[str, int, str]]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = Path(dirpath) / n
            st = p.lstat()
            what = f"-> {os.readlink(p)}" if p.is_symlink() else ("dir" if p.is_dir() else p.read_bytes().decode())
            out[str(p.relative_to(root))] = (what, st.st_mode, str(st.st_mtime_ns if p.is_file() else ""))
    return out


def test_copy_then_sync_back(tmp_path: Path) -> None:
    live = tmp_path / "live"
    (live / "lib/etcd").mkdir(parents=True)
    (live / "lib/etcd/db").write_text("before")
    (live / "lib/keep").write_text("same")
    (live / "log").mkdir()
    os.symlink("lib/keep", live / "link")
    os.chmod(live / "lib/keep", 0o600)
    snap = tmp_path / "snap" / "var"
    treesync.copy_tree(live, snap)
    assert _tree(snap) == _tree(live)
    with pytest.raises(treesync.TreeError):
        treesync.copy_tree(live, snap)  # never over an existing copy

    (live / "lib/etcd/db").write_text("after!")            # changed
    (live / "lib/etcd/new").write_text("written later")    # new
    (live / "log").rmdir()                                  # removed
    (live / "log").write_text("a file where a dir was")    # type changed
    os.unlink(live / "link")
    os.symlink("elsewhere", live / "link")                  # link retargeted
    report = treesync.sync_tree(snap, live)
    assert _tree(live) == _tree(snap)
    assert (live / "lib/etcd/db").read_text() == "before" and not (live / "lib/etcd/new").exists()
    assert report.removed == 1 and report.copied == 3        # new removed; db, log, link copied; keep untouched
    again = treesync.sync_tree(snap, live)
    assert (again.copied, again.removed) == (0, 0)
    assert treesync.tree_size(snap) == len("before") + len("same")
