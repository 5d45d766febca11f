"""Turn bootstrap data (`#cloud-config` user data) into shell steps run inside a node container.

Containers have no cloud-init, so, like upstream CAPD, we interpret the few modules the kubeadm
bootstrap provider emits: `bootcmd`, `write_files` (encodings b64/base64, gzip/gz, gz+b64/gzip+base64,
permissions, owner, append, defer) and `runcmd` (strings run with `/bin/sh -c`, lists as argv). Other
modules are ignored. Order follows cloud-init's stages: bootcmd, write_files, runcmd, deferred
write_files. A user data that starts with `#!` is run as one script.

The steps are rendered into one script that runs detached inside the container and records its
progress in files, so a controller restart never runs bootstrap twice and never loses its output:
- a lock directory taken atomically (mkdir) before the script starts;
- the full log at BOOTSTRAP_LOG; the step being run; the exit status of a failed step;
- upstream's success sentinel BOOTSTRAP_SENTINEL once every step has succeeded.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import shlex
from dataclasses import dataclass, field
from typing import Any

import yaml

from capd_py.api import kubeyaml

BOOTSTRAP_SENTINEL = "/run/cluster-api/bootstrap-success.complete"   # upstream CAPD's marker
BOOTSTRAP_LOG = "/var/log/capd-py-bootstrap.log"
WORK_DIR = "/run/capd-py/bootstrap"
SCRIPT_PATH = f"{WORK_DIR}/run.sh"
LOCK_DIR = f"{WORK_DIR}.lock"
RC_FILE = f"{WORK_DIR}.rc"          # "<step> <exit code>" of the failed step
STEP_FILE = f"{WORK_DIR}.step"      # "<step>/<total> <description>" being run
STARTED_FILE = f"{WORK_DIR}.started"  # epoch seconds (container clock) when the script started
PID_FILE = f"{WORK_DIR}.pid"
# The first line after the shebang tells tools (and the fake runtime) where the outcome is recorded.
SCRIPT_HEADER = (f"# capd-py-bootstrap done={BOOTSTRAP_SENTINEL} rc={RC_FILE} log={BOOTSTRAP_LOG} "
                 f"lock={LOCK_DIR}")
LAUNCH_TAG = "capd-py-bootstrap-launch"

# Same preflight checks upstream CAPD skips for kubeadm in containers.
IGNORE_PREFLIGHT = "SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables"


class CloudInitError(ValueError):
    """The bootstrap data cannot be interpreted (bad YAML, bad encoding, bad entry)."""


@dataclass(frozen=True)
class Step:
    """One shell step: `argv` run with `stdin` (None = /dev/null)."""
    argv: tuple[str, ...]
    description: str
    stdin: bytes | None = None

    @property
    def shell(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class WriteFile:
    path: str
    content: bytes
    permissions: str = "0644"
    owner: str = "root:root"
    append: bool = False
    defer: bool = False


@dataclass
class CloudConfig:
    bootcmd: list[tuple[str, ...]] = field(default_factory=list)
    write_files: list[WriteFile] = field(default_factory=list)
    runcmd: list[tuple[str, ...]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


# --- parsing ----------------------------------------------------------------------------------

def _b64(raw: bytes) -> bytes:
    return base64.b64decode(b"".join(raw.split()), validate=True)


def _decode(content: Any, encoding: str | None, path: str) -> bytes:
    if content is None:
        content = ""
    raw = content.encode() if isinstance(content, str) else bytes(content) if isinstance(content, bytes) \
        else str(content).encode()
    enc = (encoding or "").strip().lower()
    try:
        if enc in ("", "text/plain"):
            return raw
        if enc in ("b64", "base64"):
            return _b64(raw)
        if enc in ("gz", "gzip"):
            return gzip.decompress(raw)
        if enc in ("gz+b64", "gz+base64", "gzip+b64", "gzip+base64"):
            return gzip.decompress(_b64(raw))
    except (binascii.Error, OSError, EOFError) as e:
        raise CloudInitError(f"write_files {path}: cannot decode {enc} content: {e}") from e
    raise CloudInitError(f"write_files {path}: unknown encoding {encoding!r}")


def _permissions(v: Any) -> str:
    if v is None or v == "":
        return "0644"
    if isinstance(v, int):  # YAML 1.1 reads an unquoted 0644 as octal -> int
        return f"0{v:o}"
    s = str(v).strip()
    if s.startswith("0o"):
        s = "0" + s[2:]
    if not s or any(c not in "01234567" for c in s):
        raise CloudInitError(f"write_files: bad permissions {v!r}")
    return s if s.startswith("0") else "0" + s


def _command(item: Any, module: str) -> tuple[str, ...]:
    if isinstance(item, str):
        return ("/bin/sh", "-c", item)
    if isinstance(item, list) and item and all(isinstance(x, str | int | float) for x in item):
        return tuple(str(x) for x in item)
    raise CloudInitError(f"{module}: entry must be a string or a list of strings, got {item!r}")


def parse(data: str | bytes) -> CloudConfig:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if text.startswith("#!"):
        return CloudConfig(write_files=[WriteFile("/run/capd-py/user-script", text.encode(), "0755")],
                           runcmd=[("/run/capd-py/user-script",)])
    try:
        doc = kubeyaml.load(text)
    except yaml.YAMLError as e:
        raise CloudInitError(f"bootstrap data is not valid YAML: {e}") from e
    if doc is None:
        return CloudConfig()
    if not isinstance(doc, dict):
        raise CloudInitError("bootstrap data is not a #cloud-config mapping")
    cfg = CloudConfig()
    for key, val in doc.items():
        if key == "bootcmd":
            cfg.bootcmd = [_command(i, "bootcmd") for i in (val or [])]
        elif key == "runcmd":
            cfg.runcmd = [_command(i, "runcmd") for i in (val or [])]
        elif key == "write_files":
            for f in val or []:
                if not isinstance(f, dict) or not str(f.get("path") or "").strip():
                    raise CloudInitError(f"write_files: entry without a path: {f!r}")
                path = str(f["path"]).strip()
                cfg.write_files.append(WriteFile(
                    path=path, content=_decode(f.get("content"), f.get("encoding"), path),
                    permissions=_permissions(f.get("permissions")),
                    owner=str(f.get("owner") or "root:root").strip(),
                    append=bool(f.get("append")), defer=bool(f.get("defer"))))
        else:
            cfg.ignored.append(str(key))
    return cfg


# --- steps ------------------------------------------------------------------------------------

def _kubeadm_fix(argv: tuple[str, ...]) -> tuple[str, ...]:
    """kubeadm init/join in a container must skip a few preflight checks (as upstream CAPD does)."""
    flag = f"--ignore-preflight-errors={IGNORE_PREFLIGHT}"
    if len(argv) == 3 and argv[0] in ("/bin/sh", "sh", "/bin/bash", "bash") and argv[1] == "-c":
        s = argv[2]
        for verb in ("kubeadm init", "kubeadm join"):
            if verb in s and "--ignore-preflight-errors" not in s:
                s = s.replace(verb, f"{verb} {flag}", 1)
        return (argv[0], argv[1], s)
    if len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "kubeadm" and argv[1] in ("init", "join") \
            and not any(a.startswith("--ignore-preflight-errors") for a in argv):
        return (argv[0], argv[1], flag, *argv[2:])
    return argv


def _write_step(f: WriteFile) -> Step:
    d = f.path.rsplit("/", 1)[0] or "/"
    redir = ">>" if f.append else ">"
    q = shlex.quote(f.path)
    sh = f"mkdir -p {shlex.quote(d)} && cat {redir} {q} && chmod {f.permissions} {q}"
    if f.owner and f.owner != "root:root":
        sh += f" && chown {shlex.quote(f.owner)} {shlex.quote(f.path)}"
    return Step(("/bin/sh", "-c", sh), f"write {f.path}", stdin=f.content)


def _cmd_step(argv: tuple[str, ...], module: str) -> Step:
    argv = _kubeadm_fix(argv)
    desc = argv[2] if len(argv) == 3 and argv[1] == "-c" else shlex.join(argv)
    return Step(argv, f"{module}: {desc.strip().splitlines()[0] if desc.strip() else desc}"[:200])


# kubeadm (ControlPlaneKubeletLocalMode, on by default since v1.33) starts a joining control-plane node's kubelet
# against that node's own API server, which only comes up tens of seconds later: the kubelet's informers are
# in client-go's exponential backoff by then, and its pods (kube-proxy, the CNI: the node's Ready) wait up to
# ~20 s more for the Service list ("services have not yet been read at least once"). Restarting it right
# after the join lists at once. Best effort: a failure here is no reason to fail the bootstrap.
KUBELET_KICK = ("/bin/sh", "-c", "if [ -f /etc/kubernetes/manifests/kube-apiserver.yaml ]; then "
                "systemctl restart kubelet || true; fi")


def _joins(argv: tuple[str, ...]) -> bool:
    return any("kubeadm join" in a for a in argv) or (
        len(argv) >= 2 and argv[0].rsplit("/", 1)[-1] == "kubeadm" and argv[1] == "join")


def steps(cfg: CloudConfig) -> list[Step]:
    out = [_cmd_step(c, "bootcmd") for c in cfg.bootcmd]
    out += [_write_step(f) for f in cfg.write_files if not f.defer]
    for c in cfg.runcmd:
        out.append(_cmd_step(c, "runcmd"))
        if _joins(c):
            out.append(Step(KUBELET_KICK, "capd-py: restart the kubelet of a joined control-plane node"))
    out += [_write_step(f) for f in cfg.write_files if f.defer]
    return out


def to_steps(data: str | bytes) -> list[Step]:
    return steps(parse(data))


# --- the detached bootstrap script ------------------------------------------------------------

def render_script(stps: list[Step]) -> dict[str, bytes]:
    """Files to place in the container (path -> content): the script plus one stdin file per step.
    Deterministic, so two reconcilers writing them concurrently write identical bytes."""
    files: dict[str, bytes] = {}
    n = len(stps)
    lines = [
        "#!/bin/sh",
        SCRIPT_HEADER,
        "# generated by capd-py from the machine's bootstrap data; runs once (see the lock and sentinel)",
        f"LOG={BOOTSTRAP_LOG}",
        "mkdir -p /run/cluster-api /var/log",
        'echo "[capd-py] bootstrap started $(date -u +%Y-%m-%dT%H:%M:%SZ)" >> "$LOG"',
        "fail() {",
        f'  echo "[capd-py] step $1/{n} failed with exit code $2" >> "$LOG"',
        f'  echo "$1 $2" > {RC_FILE}.tmp && mv -f {RC_FILE}.tmp {RC_FILE}',
        "  exit 1",
        "}",
    ]
    for i, st in enumerate(stps, 1):
        desc = st.description.replace("\n", " ")
        stdin = "/dev/null"
        if st.stdin is not None:
            stdin = f"{WORK_DIR}/stdin-{i}"
            files[stdin] = st.stdin
        lines += [
            f"echo {shlex.quote(f'{i}/{n} {desc}')} > {STEP_FILE}",
            f"echo {shlex.quote(f'[capd-py] step {i}/{n}: {desc}')} >> \"$LOG\"",
            f"{st.shell} < {stdin} >> \"$LOG\" 2>&1 || fail {i} $?",
        ]
    lines += [
        f'echo "[capd-py] bootstrap succeeded ({n} steps)" >> "$LOG"',
        f"echo success > {BOOTSTRAP_SENTINEL}",
        "",
    ]
    files[SCRIPT_PATH] = "\n".join(lines).encode()
    return files


def launch_command() -> list[str]:
    """Start the script detached unless it was ever started (atomic mkdir lock); prints the outcome."""
    sh = (f"mkdir -p {shlex.quote(WORK_DIR.rsplit('/', 1)[0])} && "
          f"if mkdir {LOCK_DIR} 2>/dev/null; then date +%s > {STARTED_FILE}; "
          f"setsid sh {SCRIPT_PATH} </dev/null >/dev/null 2>&1 & echo $! > {PID_FILE}; echo launched; "
          f"else echo already; fi")
    return ["sh", "-c", sh, LAUNCH_TAG]


def probe_command(tail: int = 20) -> list[str]:
    """Report the bootstrap state: first line a status word, then the last log lines."""
    done = (f"if [ -f {BOOTSTRAP_SENTINEL} ]; then echo done; "
            f"elif [ -f {RC_FILE} ]; then echo \"failed $(cat {RC_FILE})\"; ")
    # a started script whose process is gone without reporting (killed, OOM) "died"; outcome files are
    # looked at again after the liveness check so a script finishing in between is not misread
    sh = (f"{done}"
          f"elif [ -d {LOCK_DIR} ]; then "
          f"if [ -f {PID_FILE} ] && ! kill -0 \"$(cat {PID_FILE})\" 2>/dev/null; then "
          f"{done}else echo died; fi; "
          f"else echo \"running $(cat {STARTED_FILE} 2>/dev/null || echo 0) $(date +%s)\"; fi; "
          f"else echo none; fi; "
          f"echo \"step $(cat {STEP_FILE} 2>/dev/null)\"; echo ---; "
          f"tail -n {int(tail)} {BOOTSTRAP_LOG} 2>/dev/null; true")
    return ["sh", "-c", sh]


@dataclass(frozen=True)
class BootstrapState:
    phase: str                 # none | running | done | failed | died | unknown
    step: str = ""             # "<i>/<n> <description>" last started
    failed_step: int = 0
    exit_code: int = 0
    elapsed: float = 0.0       # seconds since start (running only)
    tail: str = ""             # last log lines


def parse_probe(output: str) -> BootstrapState:
    head, _, tail = output.partition("\n---\n")
    lines = head.splitlines()
    first = (lines[0] if lines else "").split()
    step = ""
    for ln in lines[1:]:
        if ln.startswith("step"):
            step = ln[4:].strip()
    tail = tail.rstrip("\n")
    if not first:
        return BootstrapState("unknown", step, tail=tail)
    word = first[0]
    if word == "done":
        return BootstrapState("done", step, tail=tail)
    if word == "failed":
        try:
            return BootstrapState("failed", step, int(first[1]), int(first[2]), tail=tail)
        except (IndexError, ValueError):
            return BootstrapState("failed", step, tail=tail)
    if word == "running":
        try:
            started, now = float(first[1]), float(first[2])
            elapsed = max(0.0, now - started) if started else 0.0
        except (IndexError, ValueError):
            elapsed = 0.0
        return BootstrapState("running", step, elapsed=elapsed, tail=tail)
    if word == "none":
        return BootstrapState("none", step, tail=tail)
    if word == "died":
        return BootstrapState("died", step, tail=tail)
    return BootstrapState("unknown", step, tail=tail)


# Waits (up to 5 s) for the boot to finish instead of answering at once: the bootstrap starts the moment systemd is
# up rather than on the next 1 s poll. Before systemd answers on its bus it returns at once (not ready: polled again).
SYSTEMD_PROBE = ["sh", "-c", "timeout 5 systemctl is-system-running --wait 2>/dev/null || true"]


def systemd_ready(output: str) -> bool:
    """`systemctl is-system-running` says running or degraded once boot has finished."""
    return output.strip().splitlines()[-1:] in (["running"], ["degraded"]) if output.strip() else False
