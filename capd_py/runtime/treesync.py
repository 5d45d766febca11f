"""Host folder copies for snapshots of stopped containers' storage (runtime.storage_paths): a full copy, a sync
that makes a folder equal to a copy again (only what differs is written: a node's /var is ~0.8 GB of which a
restore changes a few MB), and a size. Everything goes through `cp -a` for what it writes: ownership, modes,
timestamps, xattrs (overlay2's opaque directories) and device nodes (its whiteouts) as they were."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path


class TreeError(Exception):
    pass


@dataclass
class SyncReport:
    copied: int = 0
    removed: int = 0


def _cp(src: str, dst: str) -> None:
    r = subprocess.run(["cp", "-a", "--no-target-directory", src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        raise TreeError(f"cp -a {src} {dst}: {r.stderr.strip()}")


def copy_tree(src: str | Path, dst: str | Path) -> None:
    """dst (must not exist) becomes a copy of src."""
    if Path(dst).exists():
        raise TreeError(f"{dst} exists")
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    _cp(str(src), str(dst))


def _remove(path: str) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    if stat.S_IFMT(a.st_mode) != stat.S_IFMT(b.st_mode) or a.st_mode != b.st_mode:
        return False
    if (a.st_uid, a.st_gid) != (b.st_uid, b.st_gid):
        return False
    if stat.S_ISCHR(a.st_mode) or stat.S_ISBLK(a.st_mode):
        return a.st_rdev == b.st_rdev
    return a.st_size == b.st_size and a.st_mtime_ns == b.st_mtime_ns


def _xattrs(path: str) -> dict[str, bytes]:
    try:
        return {k: os.getxattr(path, k, follow_symlinks=False) for k in os.listxattr(path, follow_symlinks=False)}
    except OSError:
        return {}


def _sync_dir(src: str, dst: str, report: SyncReport) -> None:
    have = {e.name: e for e in os.scandir(dst)}
    want = {e.name: e for e in os.scandir(src)}
    for name in have.keys() - want.keys():
        _remove(os.path.join(dst, name))
        report.removed += 1
    for name, e in want.items():
        s, d = os.path.join(src, name), os.path.join(dst, name)
        s_st = e.stat(follow_symlinks=False)
        old = have.get(name)
        if old is not None:
            d_st = old.stat(follow_symlinks=False)
            if stat.S_ISDIR(s_st.st_mode) and stat.S_ISDIR(d_st.st_mode):
                _sync_dir(s, d, report)
                if (s_st.st_mode, s_st.st_uid, s_st.st_gid) != (d_st.st_mode, d_st.st_uid, d_st.st_gid) \
                        or _xattrs(s) != _xattrs(d):
                    os.chmod(d, stat.S_IMODE(s_st.st_mode))
                    os.chown(d, s_st.st_uid, s_st.st_gid)
                    for k, v in _xattrs(s).items():
                        os.setxattr(d, k, v)
                continue
            if stat.S_ISLNK(s_st.st_mode) and stat.S_ISLNK(d_st.st_mode) and os.readlink(s) == os.readlink(d) \
                    and (s_st.st_uid, s_st.st_gid) == (d_st.st_uid, d_st.st_gid):
                continue
            if not stat.S_ISLNK(s_st.st_mode) and _same(s_st, d_st):
                continue
            _remove(d)
        _cp(s, d)
        report.copied += 1


def sync_tree(src: str | Path, dst: str | Path) -> SyncReport:
    """Make the existing folder dst equal to src: remove what src lacks, copy what is new or differs (by type,
    mode, owner, size and modification time)."""
    if not Path(src).is_dir() or not Path(dst).is_dir():
        raise TreeError(f"{src} and {dst} must both be folders")
    report = SyncReport()
    _sync_dir(str(src), str(dst), report)
    return report


def tree_size(path: str | Path) -> int:
    """Bytes of the regular files under path."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total
