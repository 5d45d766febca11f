"""`capd-py extension serve|manifest`: run a Runtime SDK extension written with capd_py.runtime_extension, and print
the ExtensionConfig that registers it (docs/runtime-sdk.md "Writing extensions in Python")."""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer

if TYPE_CHECKING:
    from capd_py.runtime_extension import Extension

extension_app = typer.Typer(no_args_is_help=True,
                            help="Runtime SDK extensions written in Python: serve one, print its ExtensionConfig.")

TargetArg = Annotated[str, typer.Argument(
    metavar="MODULE:ATTR",
    help="The Extension (or a function returning one), e.g. capd_py.testing.test_extension:extension or "
         "my_ext:extension for ./my_ext.py.")]
CertDirOpt = Annotated[Path | None, typer.Option(
    "--cert-dir", help="tls.crt/tls.key (+ ca.crt) to serve; made there when missing, with a CA (ca.crt, ca.key). "
    "Default ~/.capd-py/runtime-extension-certs.")]


def _fail(msg: str, code: int = 1) -> typer.Exit:
    sys.stderr.write(f"ERROR: {msg}\n")
    return typer.Exit(code)


def load_extension(target: str) -> Extension:
    """MODULE:ATTR -> the Extension it names (ATTR may be a function of no arguments returning one); the current
    directory is importable, so a file next to the caller works. Raises typer.Exit(2) naming what is wrong."""
    from capd_py.runtime_extension import Extension
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise _fail(f"{target!r}: expected MODULE:ATTR, e.g. my_extension:extension", 2)
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise _fail(f"cannot import {module_name}: {e}", 2) from e
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise _fail(f"{module_name} has no attribute {attr!r}", 2)
        obj = getattr(obj, part)
    if not isinstance(obj, Extension) and callable(obj):
        obj = obj()
    if not isinstance(obj, Extension):
        raise _fail(f"{target} is a {type(obj).__name__}, not a capd_py.runtime_extension.Extension", 2)
    return obj


@extension_app.command("serve")
def serve_cmd(
    target: TargetArg,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any free one).")] = 9443,
    address: Annotated[str, typer.Option("--address", help="Address to listen on.")] = "0.0.0.0",
    cert_dir: CertDirOpt = None,
    cert_host: Annotated[list[str] | None, typer.Option(
        "--cert-host", help="A name or address the core dials, for the serving certificate (repeatable; "
        "localhost, 127.0.0.1 and --address are always in it).")] = None,
    kubeconfig: Annotated[str | None, typer.Option(
        "--kubeconfig", envvar="CAPD_PY_KUBECONFIG",
        help="Management cluster kubeconfig, for extensions that read it (the test extension's ConfigMaps).")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
) -> None:
    """Serve an extension over HTTPS until interrupted (SIGINT/SIGTERM). Progress on stderr."""
    import os

    from capd_py.runtime_extension import default_cert_dir, ensure_certs, serve
    from capd_py.runtime_extension.server import certificate_hosts
    if kubeconfig is not None:  # extensions read it from the environment when they first need the cluster
        os.environ["CAPD_PY_KUBECONFIG"] = kubeconfig
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    ext = load_extension(target)
    directory = cert_dir or default_cert_dir()
    try:
        certs = ensure_certs(directory, certificate_hosts(address, cert_host or []))
    except OSError as e:
        raise _fail(f"certificates in {directory}: {e}") from e

    async def run() -> None:
        try:
            server = await serve(ext, address, port, certs=certs)
        except OSError as e:
            raise _fail(f"cannot listen on {address}:{port}: {e}") from e
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        names = ", ".join(f"{r.name} ({r.hook.name})" for r in ext.registrations) or "none"
        sys.stderr.write(f" ✓ serving {len(ext.registrations)} handler(s) on {server.url}: {names}\n"
                         f"   CA (the ExtensionConfig's caBundle): {certs.directory / 'ca.crt'}\n")
        try:
            await stop.wait()
        finally:
            await server.stop()
            sys.stderr.write(" • stopped\n")

    asyncio.run(run())


@extension_app.command("manifest")
def manifest_cmd(
    target: TargetArg,
    url: Annotated[str, typer.Option("--url", help="https://HOST:PORT where the core reaches the server.")],
    name: Annotated[str | None, typer.Option(
        "--name", help="ExtensionConfig name (default: the Extension's name).")] = None,
    namespace_selector: Annotated[str | None, typer.Option(
        "--namespace-selector", help="Only Clusters in namespaces matching this label selector, e.g. "
        "'kubernetes.io/metadata.name in (ns1,ns2)' (default: every namespace).")] = None,
    setting: Annotated[list[str] | None, typer.Option(
        "--setting", help="KEY=VALUE for spec.settings (repeatable; added to the Extension's own).")] = None,
    cert_dir: CertDirOpt = None,
) -> None:
    """Print the ExtensionConfig (runtime.cluster.x-k8s.io/v1beta2) registering the extension at --url, trusting
    the CA of --cert-dir (made, with a serving certificate for the URL's host, when missing)."""
    from capd_py.runtime_extension import default_cert_dir, ensure_certs, extension_config, to_yaml
    from capd_py.runtime_extension import namespace_selector as parse_selector
    ext = load_extension(target)
    config_name = name or ext.name
    if not config_name:
        raise _fail("--name is required: the Extension has no name", 2)
    host = urlsplit(url).hostname
    if not url.startswith("https://") or not host:
        raise _fail(f"--url {url!r}: expected https://HOST[:PORT]", 2)
    settings = ext.manifest_settings(config_name)
    for kv in setting or []:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            raise _fail(f"--setting {kv!r}: expected KEY=VALUE", 2)
        settings[key] = value
    try:
        selector = parse_selector(namespace_selector)
    except ValueError as e:
        raise _fail(f"--namespace-selector: {e}", 2) from e
    directory = cert_dir or default_cert_dir()
    try:
        certs = ensure_certs(directory, [host])
    except OSError as e:
        raise _fail(f"certificates in {directory}: {e}") from e
    sys.stdout.write(to_yaml(extension_config(config_name, certs.ca_pem, url=url, namespace_selector=selector,
                                              settings=settings)))
