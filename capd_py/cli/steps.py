"""kind-style step lines on stderr: a live rich spinner on a terminal, plain ` • ... / ✓ ...` lines otherwise.

    with steps.step("Creating management cluster 🖥"):
        ...

Plain mode is used when the stream is not a TTY, when CI is set, or when asked (`plain=True`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text


def _interactive(stream: TextIO) -> bool:
    if os.environ.get("CI") or os.environ.get("CAPD_PY_PLAIN"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Steps:
    def __init__(self, stream: TextIO | None = None, plain: bool | None = None, quiet: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        self.spinner = not plain if plain is not None else _interactive(self.stream)
        self.quiet = quiet
        self._status = ""
        self._t0 = 0.0
        self._live: Live | None = None
        self._spinner: Spinner | None = None
        self._lock = threading.Lock()
        self._details: list[str] = []

    # -- low level ---------------------------------------------------------------------------
    def _write(self, s: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self.stream.write(s)
            self.stream.flush()

    def start(self, status: str) -> None:
        self.end(True)
        self._status = status
        self._t0 = time.monotonic()
        if self.spinner:
            if not self.quiet:  # a transient live line: it is replaced by the ✓/✗ line when the step ends
                console = Console(file=self.stream, force_terminal=True, highlight=False, soft_wrap=True)
                self._spinner = Spinner("dots", text=Text(status))
                # stdout stays the caller's (data only): no redirection of stdout/stderr through the live view
                self._live = Live(self._spinner, console=console, transient=True, refresh_per_second=10,
                                  redirect_stdout=False, redirect_stderr=False)
                self._live.start()
        else:
            self._write(f" • {status}  ...\n")

    def update(self, detail: str) -> None:
        """Progress within a step (spinner: appended to the line; plain: nothing, to keep logs short)."""
        if self.spinner and self._status:
            base = self._status.split(" — ", 1)[0]
            self._status = f"{base} — {detail}" if detail else base
            if self._spinner is not None:
                self._spinner.update(text=Text(self._status))

    def details(self, lines: list[str]) -> None:
        """What the step waits for, several lines (e.g. pending machines and why): live under the spinner on a
        terminal; in plain mode printed indented, only when they change (logs stay short)."""
        if lines == self._details:
            return
        self._details = list(lines)
        if self._live is not None and self._spinner is not None:
            self._live.update(Group(self._spinner, Text("\n".join(f"   {x}" for x in lines))))
        elif not self.spinner and self._status:
            self._write("".join(f"   {x}\n" for x in lines))

    def end(self, success: bool) -> None:
        if not self._status:
            return
        status = self._status.split(" — ", 1)[0] if success else self._status
        if self._live is not None:
            self._live.stop()
            self._live, self._spinner = None, None
        mark = "✓" if success else "✗"
        if self.spinner:  # coloured on a terminal, like kind
            mark = f"\x1b[{32 if success else 31}m{mark}\x1b[0m"
        self._write(f" {mark} {status}\n")
        if not success and self.spinner and self._details:  # the live details vanished with the live view
            self._write("".join(f"   {x}\n" for x in self._details))
        self._status = ""
        self._details = []

    def info(self, line: str) -> None:
        """A line of prose between steps (also to stderr); above the live line while a step runs."""
        if self._live is not None:
            self._live.console.print(Text(line))
        else:
            self._write(f"{line}\n")

    # -- the usual way -----------------------------------------------------------------------
    @contextmanager
    def step(self, status: str) -> Iterator[Steps]:
        self.start(status)
        try:
            yield self
        except BaseException:
            self.end(False)
            raise
        self.end(True)
