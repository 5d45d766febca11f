from __future__ import annotations

import io

import pytest

from capd_py.cli.steps import Steps

pytestmark = pytest.mark.unit


def test_plain_lines() -> None:
    buf = io.StringIO()
    s = Steps(buf, plain=True)
    with s.step("Creating management cluster 🖥"):
        s.update("ignored in plain mode")
    s.info("hello")
    assert buf.getvalue() == " • Creating management cluster 🖥  ...\n ✓ Creating management cluster 🖥\nhello\n"


def test_failure_marks_step_and_reraises() -> None:
    buf = io.StringIO()
    s = Steps(buf, plain=True)
    with pytest.raises(RuntimeError), s.step("Starting control-plane 🕹️"):
        raise RuntimeError("boom")
    assert buf.getvalue().splitlines()[-1] == " ✗ Starting control-plane 🕹️"


def test_start_ends_previous_step() -> None:
    buf = io.StringIO()
    s = Steps(buf, plain=True)
    s.start("a")
    s.start("b")
    s.end(True)
    s.end(True)  # nothing in progress: no-op
    assert buf.getvalue() == " • a  ...\n ✓ a\n • b  ...\n ✓ b\n"


def test_non_tty_defaults_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert Steps(io.StringIO()).spinner is False
    monkeypatch.setenv("CI", "true")

    class TTY(io.StringIO):
        def isatty(self) -> bool:
            return True
    assert Steps(TTY()).spinner is False
    monkeypatch.delenv("CI")
    assert Steps(TTY()).spinner is True


def test_spinner_mode_ends_with_coloured_mark() -> None:
    buf = io.StringIO()
    s = Steps(buf, plain=False)
    with s.step("x"):
        pass
    assert buf.getvalue().endswith(" \x1b[32m✓\x1b[0m x\n")


def test_quiet() -> None:
    buf = io.StringIO()
    with Steps(buf, plain=True, quiet=True).step("x"):
        pass
    assert buf.getvalue() == ""


def test_spinner_mode_shows_progress_live_and_prose_above_it() -> None:
    buf = io.StringIO()
    s = Steps(buf, plain=False)
    with s.step("Waiting for the cluster"):
        s.update("1 of 2 machines")
        s.info("a note")
    out = buf.getvalue()
    assert "Waiting for the cluster — 1 of 2 machines" in out and "a note\n" in out
    assert out.endswith(" \x1b[32m✓\x1b[0m Waiting for the cluster\n")  # the detail is dropped on success


def test_spinner_mode_quiet_writes_nothing() -> None:
    buf = io.StringIO()
    with Steps(buf, plain=False, quiet=True).step("x") as s:
        s.update("y")
    assert buf.getvalue() == ""
