"""The probe a DockerMachine runs before its bootstrap (`cloudinit.SYSTEMD_PROBE`), against a real node container:
it waits for systemd's boot to finish instead of answering "starting", so the bootstrap is launched the moment the
node is up rather than on the controller's next poll."""

from __future__ import annotations

import secrets
import time

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.api.versions import DEFAULT_VERSION
from capd_py.cli.management import privileged_mode
from capd_py.reconcile import cloudinit
from capd_py.reconcile import dockermachine as dmr
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

IMAGE = f"capd-py/node:{DEFAULT_VERSION}"


def test_the_systemd_probe_waits_for_the_boot(rt: DockerRuntime) -> None:
    if not rt.image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    name = f"t-boot-{secrets.token_hex(3)}"
    spec = dmr.node_spec(name, name, "n", {"spec": {}}, IMAGE, name, False, privileged_mode())
    answers: list[tuple[float, str]] = []
    try:
        networks.ensure_network(rt, name, {CONTAINER_NAMESPACE: name})
        info = rt.run_container(spec)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:  # probing as fast as possible from the container's start
            out = rt.exec(info.name, cloudinit.SYSTEMD_PROBE).output.strip()
            answers.append((round(time.monotonic() - t0, 2), out))
            if cloudinit.systemd_ready(out):
                break
            time.sleep(0.05)
        assert answers and cloudinit.systemd_ready(answers[-1][1]), answers
        # before systemd answers on its bus the probe returns at once with nothing useful; once it answers, the
        # probe waits for the end of the boot: it never reports the boot in progress
        assert not any(out.endswith("starting") or out.endswith("initializing") for _, out in answers), answers
        # booted: it answers at once
        t1 = time.monotonic()
        assert cloudinit.systemd_ready(rt.exec(info.name, cloudinit.SYSTEMD_PROBE).output)
        assert time.monotonic() - t1 < 3
    finally:
        rt.remove_container(spec.name)
        rt.remove_network(name)
    assert rt.get_container(spec.name) is None
