from __future__ import annotations

import base64
import gzip

import pytest

from capd_py.reconcile import cloudinit as ci

pytestmark = pytest.mark.unit

CFG = """\
#cloud-config
write_files:
- path: /etc/plain.txt
  content: |
    hello
- path: /etc/b64.txt
  encoding: b64
  content: {b64}
- path: /etc/gz.bin
  encoding: gzip
  content: !!binary {gzb}
- path: /etc/gzb64.txt
  encoding: gz+b64
  permissions: '0600'
  owner: nobody:nogroup
  content: {gzb64}
- path: /etc/append.txt
  append: true
  permissions: 0640
  content: more
- path: /etc/late.txt
  defer: true
  content: late
runcmd:
- echo one
- [touch, /tmp/two]
- kubeadm init --config /run/kubeadm/kubeadm.yaml
bootcmd:
- [mkdir, -p, /boot-early]
unknown_module: 3
"""


def _cfg() -> str:
    return CFG.format(
        b64=base64.b64encode(b"from b64").decode(),
        gzb=base64.b64encode(gzip.compress(b"gz bytes\x00\x01")).decode(),
        gzb64=base64.b64encode(gzip.compress(b"gz+b64 text")).decode(),
    )


def test_parse_write_files_encodings_permissions_owner() -> None:
    cfg = ci.parse(_cfg())
    by = {f.path: f for f in cfg.write_files}
    assert by["/etc/plain.txt"].content == b"hello\n"
    assert by["/etc/b64.txt"].content == b"from b64"
    assert by["/etc/gz.bin"].content == b"gz bytes\x00\x01"
    assert by["/etc/gzb64.txt"].content == b"gz+b64 text"
    assert by["/etc/gzb64.txt"].permissions == "0600"
    assert by["/etc/gzb64.txt"].owner == "nobody:nogroup"
    assert by["/etc/append.txt"].append and by["/etc/append.txt"].permissions == "0640"  # YAML octal int
    assert by["/etc/late.txt"].defer
    assert cfg.ignored == ["unknown_module"]


def test_steps_follow_cloud_init_stage_order() -> None:
    steps = ci.to_steps(_cfg())
    descs = [s.description for s in steps]
    assert descs[0].startswith("bootcmd: mkdir -p /boot-early")
    assert descs[1] == "write /etc/plain.txt"
    assert descs[-1] == "write /etc/late.txt"  # deferred write_files run after runcmd
    run = [s for s in steps if s.description.startswith("runcmd")]
    assert run[0].argv == ("/bin/sh", "-c", "echo one")
    assert run[1].argv == ("touch", "/tmp/two")
    assert "--ignore-preflight-errors=" + ci.IGNORE_PREFLIGHT in run[2].argv[2]


def test_write_step_shell() -> None:
    steps = {s.description: s for s in ci.to_steps(_cfg())}
    s = steps["write /etc/gzb64.txt"]
    assert s.stdin == b"gz+b64 text"
    assert s.argv[2] == ("mkdir -p /etc && cat > /etc/gzb64.txt && chmod 0600 /etc/gzb64.txt"
                         " && chown nobody:nogroup /etc/gzb64.txt")
    assert ">> /etc/append.txt" in steps["write /etc/append.txt"].argv[2]
    assert "chown" not in steps["write /etc/plain.txt"].argv[2]


def test_kubeadm_argv_form_gets_preflight_flag_once() -> None:
    steps = ci.to_steps("#cloud-config\nruncmd:\n- [kubeadm, join, --config, /x]\n"
                        "- kubeadm join --ignore-preflight-errors=all\n")
    assert steps[0].argv[:3] == ("kubeadm", "join", f"--ignore-preflight-errors={ci.IGNORE_PREFLIGHT}")
    assert steps[2].argv[2].count("--ignore-preflight-errors") == 1


def test_every_join_is_followed_by_the_control_plane_kubelet_restart() -> None:
    steps = ci.to_steps("#cloud-config\nruncmd:\n- [kubeadm, join, --config, /x]\n- echo after\n"
                        "- kubeadm init --config /y\n")
    assert [s.argv == ci.KUBELET_KICK for s in steps] == [False, True, False, False]
    # only where kubeadm put a local API server: a worker's kubelet talks to the load balancer, up all along
    assert "/etc/kubernetes/manifests/kube-apiserver.yaml" in ci.KUBELET_KICK[2]


@pytest.mark.parametrize("bad", [
    "#cloud-config\nwrite_files: [{path: /x, encoding: b64, content: '!!!'}]\n",
    "#cloud-config\nwrite_files: [{path: /x, encoding: rot13, content: a}]\n",
    "#cloud-config\nwrite_files: [{content: a}]\n",
    "#cloud-config\nruncmd: [{a: b}]\n",
    "#cloud-config\nwrite_files: [{path: /x, permissions: rwx}]\n",
    "#cloud-config\n: : :\n  - [\n",
    "- just a list\n",
])
def test_invalid_data_raises(bad: str) -> None:
    with pytest.raises(ci.CloudInitError):
        ci.to_steps(bad)


def test_empty_and_shell_script() -> None:
    assert ci.to_steps("#cloud-config\n") == []
    steps = ci.to_steps("#!/bin/sh\necho hi\n")
    assert steps[0].stdin == b"#!/bin/sh\necho hi\n" and steps[1].argv == ("/run/capd-py/user-script",)


def test_render_script_is_deterministic_and_complete() -> None:
    steps = ci.to_steps(_cfg())
    a, b = ci.render_script(steps), ci.render_script(steps)
    assert a == b
    script = a[ci.SCRIPT_PATH].decode()
    assert script.splitlines()[1] == ci.SCRIPT_HEADER
    assert f"echo success > {ci.BOOTSTRAP_SENTINEL}" in script
    assert script.count("|| fail ") == len(steps)
    stdin_files = [p for p in a if p != ci.SCRIPT_PATH]
    assert len(stdin_files) == sum(1 for s in steps if s.stdin is not None)
    assert a[f"{ci.WORK_DIR}/stdin-2"] == b"hello\n"


def test_launch_is_guarded_by_lock() -> None:
    cmd = ci.launch_command()
    assert cmd[-1] == ci.LAUNCH_TAG
    assert f"mkdir {ci.LOCK_DIR}" in cmd[2] and "setsid" in cmd[2]


@pytest.mark.parametrize("out,phase", [
    ("done\nstep 3/3 x\n---\nlog\n", "done"),
    ("none\nstep \n---\n", "none"),
    ("died\nstep 1/2 x\n---\n", "died"),
    ("", "unknown"),
])
def test_parse_probe_simple(out: str, phase: str) -> None:
    assert ci.parse_probe(out).phase == phase


def test_parse_probe_failed_and_running() -> None:
    st = ci.parse_probe("failed 2 127\nstep 2/4 runcmd: nope\n---\na\nb: not found\n")
    assert (st.phase, st.failed_step, st.exit_code, st.step) == ("failed", 2, 127, "2/4 runcmd: nope")
    assert st.tail == "a\nb: not found"
    st = ci.parse_probe("running 100 160\nstep 1/2 x\n---\n")
    assert st.phase == "running" and st.elapsed == 60


def test_systemd_ready() -> None:
    assert ci.systemd_ready("running\n") and ci.systemd_ready("degraded\n")
    assert not ci.systemd_ready("starting\n") and not ci.systemd_ready("") and not ci.systemd_ready("offline")
