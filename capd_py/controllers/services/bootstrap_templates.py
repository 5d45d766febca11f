"""The cloud-config templates of the kubeadm bootstrap (templates/bootstrap/*.j2), read from disk once.

The rendering is pure (capd_py/reconcile/kubeadm_render.py takes the templates' text); finding and reading the
files is here: `$CAPD_PY_BOOTSTRAP_TEMPLATES` first, then the source tree (repo/templates/bootstrap), then the
installed data-files location (`<prefix>/share/capd-py/templates/bootstrap`). A template found in an earlier
folder wins, as a jinja2 FileSystemLoader over the same folders would have it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from capd_py.reconcile.kubeadm_render import TEMPLATE_NAMES, CloudConfigTemplates


def template_dirs() -> list[Path]:
    dirs: list[Path] = []
    env = os.environ.get("CAPD_PY_BOOTSTRAP_TEMPLATES")
    if env:
        dirs.append(Path(env))
    dirs.append(Path(__file__).resolve().parents[3] / "templates" / "bootstrap")
    for prefix in {sys.prefix, sys.base_prefix}:
        dirs.append(Path(prefix) / "share" / "capd-py" / "templates" / "bootstrap")
    return [d for d in dirs if d.is_dir()]


def read_templates(dirs: list[Path]) -> dict[str, str]:
    """name -> text of every template the rendering needs, each from the first folder holding it."""
    out: dict[str, str] = {}
    for name in TEMPLATE_NAMES:
        path = next((d / name for d in dirs if (d / name).is_file()), None)
        if path is not None:
            out[name] = path.read_text(encoding="utf-8")
    return out


class BootstrapTemplates:
    """`ctx.bootstrap_templates`: the templates, read and compiled on first use (a process that never renders
    bootstrap data never looks for them)."""

    def __init__(self, dirs: list[Path] | None = None):
        self._dirs = dirs
        self._loaded: CloudConfigTemplates | None = None

    def get(self) -> CloudConfigTemplates:
        if self._loaded is None:
            dirs = self._dirs if self._dirs is not None else template_dirs()
            if not dirs:
                raise RuntimeError("bootstrap templates not found (templates/bootstrap)")
            self._loaded = CloudConfigTemplates(read_templates(dirs))
        return self._loaded
