"""The `capd-py` command line (typer). Progress goes to stderr as kind-style step lines; data (YAML,
kubeconfigs, trees) to stdout. Exit codes: 0 success, 1 failure, 2 usage error."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from capd_py.api import conditions
from capd_py.api.gvk import (
    CLUSTER,
    DEV_CLUSTER,
    DOCKER_CLUSTER,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
)
from capd_py.api.labels import CLUSTER_NAME
from capd_py.cli import management as mgmt
from capd_py.cli.clusterctl import clusterctl_app
from capd_py.cli.extension import extension_app
from capd_py.cli.steps import Steps
from capd_py.cli.waiting import apoll

T = TypeVar("T")

app = typer.Typer(name="capd-py", no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  help="Cluster API with a Docker infrastructure provider, in Python.")
generate_app = typer.Typer(no_args_is_help=True, help="Generate YAML (to stdout).")
get_app = typer.Typer(no_args_is_help=True, help="Get data about clusters.")
describe_app = typer.Typer(no_args_is_help=True, help="Describe objects as a tree.")
delete_app = typer.Typer(no_args_is_help=True, help="Delete clusters, the management cluster, or everything.")
app.add_typer(generate_app, name="generate")
app.add_typer(get_app, name="get")
app.add_typer(describe_app, name="describe")
app.add_typer(delete_app, name="delete")

KubeconfigOpt = Annotated[str | None, typer.Option(
    "--kubeconfig", envvar="CAPD_PY_KUBECONFIG",
    help="Management cluster kubeconfig (default: ~/.capd-py/capd-mgmt.kubeconfig if it exists, else $KUBECONFIG).")]
NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="Namespace of the cluster objects.")]


def fail(msg: str, code: int = 1) -> NoReturn:
    sys.stderr.write(f"ERROR: {msg}\n")
    raise typer.Exit(code)


def management_kubeconfig(explicit: str | None, name: str = mgmt.DEFAULT_NAME) -> str | None:
    if explicit:
        p = Path(explicit).expanduser()
        if not p.exists():
            fail(f"kubeconfig {p} does not exist", 2)
        return str(p)
    default = mgmt.kubeconfig_path(name)
    if default.exists():
        return str(default)
    return None  # the kubernetes client falls back to $KUBECONFIG / ~/.kube/config


def connect(kubeconfig: str | None) -> Any:
    from kubernetes.config import ConfigException

    from capd_py.kube.client import Kube
    try:
        return Kube.from_kubeconfig(management_kubeconfig(kubeconfig))
    except (ConfigException, OSError) as e:
        fail(f"cannot load the management cluster kubeconfig: {e} (run `capd-py init` first?)")


def run_async(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    from capd_py.kube.client import KubeError
    try:
        return asyncio.run(fn())
    except KubeError as e:
        fail(f"API server: {e}")
    except OSError as e:
        fail(f"cannot reach the API server: {e}")
    except Exception as e:  # aiohttp / urllib3 connection errors: say what, not a traceback
        if type(e).__module__.startswith(("urllib3", "aiohttp")):
            fail(f"cannot reach the API server: {e}")
        raise


# -- version ------------------------------------------------------------------------------------

@app.command()
def version() -> None:
    """Print the capd-py version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from capd_py.cli.generate import DEFAULT_KUBERNETES_VERSION
    try:
        v = dist_version("capd-py")
    except PackageNotFoundError:
        v = "unknown"
    typer.echo(f"capd-py {v} (default Kubernetes {DEFAULT_KUBERNETES_VERSION}, "
               f"python {sys.version.split()[0]})")


@app.command()
def completion(shell: Annotated[str, typer.Argument(help="bash, zsh or fish.")]) -> None:
    """Print a shell completion script, e.g. `source <(capd-py completion bash)` (as kind's)."""
    from typer._completion_shared import get_completion_script

    if shell not in ("bash", "zsh", "fish"):
        fail(f"unsupported shell {shell!r}: bash, zsh or fish", 2)
    # typer's own script: the shell then asks `capd-py` for candidates through _CAPD_PY_COMPLETE
    sys.stdout.write(get_completion_script(prog_name="capd-py", complete_var="_CAPD_PY_COMPLETE", shell=shell) + "\n")


# -- generate -------------------------------------------------------------------------------------

def _generate(name: str, namespace: str | None, kubernetes_version: str | None, cp: int | None, workers: int | None,
              pod_cidr: str | None, service_cidr: str | None, template: Path | None, flavor: str | None = None) -> str:
    from capd_py.cli.generate import TemplateError, TemplateValueError, generate_cluster
    try:
        return generate_cluster(name, namespace=namespace, kubernetes_version=kubernetes_version,
                                control_plane_machine_count=cp, worker_machine_count=workers,
                                pod_cidr=pod_cidr, service_cidr=service_cidr, template=template, flavor=flavor)
    except TemplateValueError as e:
        fail(str(e), 2)
    except TemplateError as e:
        fail(str(e))


FlavorOpt = Annotated[str | None, typer.Option(
    "--flavor", help="A template variant, as clusterctl's: NAME selects templates/cluster-template-NAME.yaml "
    "(machinepool: workers as a MachinePool). Default: cluster-template.yaml.")]


@generate_app.command("cluster")
def generate_cluster_cmd(
    name: Annotated[str, typer.Argument(help="Cluster name (CLUSTER_NAME).")],
    kubernetes_version: Annotated[str | None, typer.Option(help="KUBERNETES_VERSION (default v1.34.4).")] = None,
    control_plane_machine_count: Annotated[int | None, typer.Option(
        min=1, help="CONTROL_PLANE_MACHINE_COUNT (default 1).")] = None,
    worker_machine_count: Annotated[int | None, typer.Option(min=0, help="WORKER_MACHINE_COUNT (default 1).")] = None,
    namespace: Annotated[str | None, typer.Option("--target-namespace", "--namespace", "-n",
                                                  help="NAMESPACE (default 'default').")] = None,
    pod_cidr: Annotated[str | None, typer.Option(help="POD_CIDR (default 10.244.0.0/16).")] = None,
    service_cidr: Annotated[str | None, typer.Option(help="SERVICE_CIDR (default 10.96.0.0/12).")] = None,
    from_: Annotated[Path | None, typer.Option("--from", help="A template file instead of the default one.")] = None,
    flavor: FlavorOpt = None,
    list_variables: Annotated[bool, typer.Option(
        "--list-variables", help="List the template's variables (required, optional with defaults) and exit.")] = False,
) -> None:
    """Print a cluster's YAML from the template; pipe it to `capd-py apply -f -`."""
    if list_variables:
        from capd_py.cli.generate import TemplateError, TemplateValueError
        from capd_py.cli.generate import list_variables as listing
        try:
            sys.stdout.write(listing(from_, flavor))
        except TemplateValueError as e:
            fail(str(e), 2)
        except TemplateError as e:
            fail(str(e))
        return
    sys.stdout.write(_generate(name, namespace, kubernetes_version, control_plane_machine_count,
                               worker_machine_count, pod_cidr, service_cidr, from_, flavor))


# -- apply ----------------------------------------------------------------------------------------

def _read_input(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror or e}", 2)


def apply_text(kubeconfig: str | None, text: str, namespace: str, dry_run: bool = False,
               results_to_stderr: bool = False) -> int:
    from capd_py.cli.apply import ApplyError, apply_objects
    from capd_py.cli.generate import TemplateError, parse_documents
    try:
        docs = parse_documents(text)
    except TemplateError as e:
        fail(str(e))
    if not docs:
        fail("no objects in the input")
    kube = connect(kubeconfig)

    async def go() -> Any:
        try:
            return await apply_objects(kube, docs, default_namespace=namespace, dry_run=dry_run)
        finally:
            kube.close()
    try:
        outcomes = run_async(go)
    except ApplyError as e:
        fail(str(e))
    bad = 0
    for o in outcomes:
        if o.ok:
            typer.echo(f"{o.ref} {o.detail}", err=results_to_stderr)
        else:
            bad += 1
            sys.stderr.write(f"ERROR: {o.ref}: {o.detail}\n")
    return bad


@app.command()
def apply(
    filename: Annotated[str, typer.Option("--filename", "-f", help="YAML file with one or more objects; - for stdin.")],
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="For objects without one.")] = "default",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Server-side dry run.")] = False,
    wait: WaitOpt = "0",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Server-side apply objects to the management cluster; with --wait, wait for every Cluster applied to be
    Available, showing the machines still pending and why."""
    from capd_py.cli.generate import TemplateError, parse_documents
    seconds = duration(wait)
    text = _read_input(filename)
    bad = apply_text(kubeconfig, text, namespace, dry_run)
    if bad:
        fail(f"{bad} object(s) rejected")
    if seconds <= 0 or dry_run:
        return
    try:
        docs = parse_documents(text)
    except TemplateError as e:
        fail(str(e))
    steps = Steps()
    for d in docs:
        if d.get("kind") == "Cluster" and str(d.get("apiVersion", "")).startswith("cluster.x-k8s.io/"):
            ns = (d.get("metadata") or {}).get("namespace") or namespace
            name = d["metadata"]["name"]
            with steps.step(f"Waiting for cluster {ns}/{name} to be Available ⏳"):
                wait_available(kubeconfig, ns, name, seconds, steps)


# -- get kubeconfig --------------------------------------------------------------------------------

def fetch_kubeconfig(kubeconfig: str | None, namespace: str, name: str) -> str:
    from capd_py.cli.kubeconfig import KubeconfigError, workload_kubeconfig
    kube = connect(kubeconfig)

    async def go() -> str:
        try:
            return await workload_kubeconfig(kube, mgmt.default_runtime, namespace, name)
        finally:
            kube.close()
    try:
        return run_async(go)
    except KubeconfigError as e:
        fail(str(e))


@get_app.command("kubeconfig")
def get_kubeconfig(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (mode 0600).")] = None,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Print a workload cluster's kubeconfig, pointed at its load balancer's host port."""
    from capd_py.cli.kubeconfig import write_private
    text = fetch_kubeconfig(kubeconfig, namespace, name)
    if output:
        write_private(output, text)
        sys.stderr.write(f"wrote {output}\n")
    else:
        sys.stdout.write(text)


@get_app.command("clusters")
def get_clusters(
    namespace: NamespaceOpt = "default",
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")] = False,
    output: Annotated[str, typer.Option("--output", "-o", help="table or name.")] = "table",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """List the workload clusters of the management cluster."""
    import datetime as _dt

    from capd_py.cli.listing import CLUSTER_HEADER, cluster_row, table
    if output not in ("table", "name"):
        fail(f"--output must be table or name, not {output!r}", 2)
    kube = connect(kubeconfig)

    async def go() -> list[dict[str, Any]]:
        try:
            return list(await kube.list(CLUSTER, None if all_namespaces else namespace))
        finally:
            kube.close()
    clusters = sorted(run_async(go), key=lambda c: (c["metadata"].get("namespace") or "", c["metadata"]["name"]))
    if output == "name":
        for c in clusters:
            typer.echo(f"{c['metadata'].get('namespace')}/{c['metadata']['name']}" if all_namespaces
                       else c["metadata"]["name"])
        return
    if not clusters:
        sys.stderr.write(f"No clusters found{'' if all_namespaces else f' in namespace {namespace}'}.\n")
        return
    now = _dt.datetime.now(_dt.UTC)
    header: tuple[str, ...] = CLUSTER_HEADER
    body = [cluster_row(c, now) for c in clusters]
    if all_namespaces:
        header = ("NAMESPACE", *header)
        body = [(c["metadata"].get("namespace") or "", *r) for c, r in zip(clusters, body, strict=True)]
    sys.stdout.write(table(header, body))


@get_app.command("nodes")
def get_nodes(
    cluster: Annotated[str, typer.Option("--cluster", "--name", help="Workload cluster name.")],
    namespace: NamespaceOpt = "default",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """List a cluster's nodes: Machine phase, workload Node status, address and container state."""
    from capd_py.api.gvk import NODE
    from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE
    from capd_py.cli import hosts as hc
    from capd_py.cli.kubeconfig import KubeconfigError, workload_kubeconfig
    from capd_py.cli.listing import NODE_HEADER, node_rows, table
    from capd_py.kube.client import Kube
    kube = connect(kubeconfig)

    async def go() -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, str]]:
        try:
            if await kube.get(CLUSTER, namespace, cluster) is None:
                fail(f"cluster {namespace}/{cluster} not found")
            machines = [m for m in await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster})]
            try:
                _host, rt = await hc.cluster_runtime(kube, namespace, cluster)
            except hc.HostError as e:
                fail(str(e))
            states = {c.name: c.status for c in await asyncio.to_thread(
                rt.list_containers, {CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace})}
            nodes: list[dict[str, Any]] | None = None
            try:
                text = await workload_kubeconfig(kube, rt, namespace, cluster)
                wl = Kube.from_kubeconfig_text(text)
                try:
                    nodes = list(await asyncio.wait_for(wl.list(NODE), 10))
                finally:
                    wl.close()
            except (KubeconfigError, TimeoutError, OSError) as e:
                sys.stderr.write(f"workload API of {cluster} not reachable ({e}); node status unknown\n")
            except Exception as e:  # noqa: BLE001 - any client error: the table still shows the Machines
                sys.stderr.write(f"workload API of {cluster}: {e}; node status unknown\n")
            return machines, nodes, states
        finally:
            kube.close()
    machines, nodes, states = run_async(go)
    sys.stdout.write(table(NODE_HEADER, node_rows(machines, nodes, states)))


# -- describe ---------------------------------------------------------------------------------------

async def cluster_objects(kube: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    cluster = await kube.get(CLUSTER, namespace, name)
    if cluster is None:
        return []
    objs = [cluster]
    for gvk in (DOCKER_CLUSTER, DEV_CLUSTER, KUBEADM_CONTROL_PLANE):
        objs += await kube.list(gvk, namespace)
    for gvk in (MACHINE_DEPLOYMENT, MACHINE_POOL, MACHINE_SET, MACHINE):
        for o in await kube.list(gvk, namespace):
            if (o.get("spec") or {}).get("clusterName") == name or \
                    (o["metadata"].get("labels") or {}).get(CLUSTER_NAME) == name:
                objs.append(o)
    return objs


@describe_app.command("cluster")
def describe_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    show_conditions: Annotated[str, typer.Option(
        "--show-conditions", help="Comma-separated kinds or kind/name whose conditions to show under them ('all' for "
        "every object; a '+' suffix shows only the conditions not in their normal state).")] = "",
    grouping: Annotated[bool, typer.Option(
        "--grouping/--no-grouping", help="Group Machines whose Available, Ready and UpToDate conditions have the "
        "same status and reason.")] = True,
    show_machinesets: Annotated[bool, typer.Option("--show-machinesets", help="Show MachineSet objects.")] = False,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Show a cluster's objects and their conditions as a tree (like clusterctl describe cluster)."""
    from capd_py.cli.describe import Options, build_tree, render
    kube = connect(kubeconfig)

    async def go() -> list[dict[str, Any]]:
        try:
            return await cluster_objects(kube, namespace, name)
        finally:
            kube.close()
    objs = run_async(go)
    if not objs:
        fail(f"cluster {namespace}/{name} not found")
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and not os.environ.get("CAPD_PY_PLAIN")
    opts = Options(show_conditions=show_conditions, grouping=grouping, show_machinesets=show_machinesets)
    sys.stdout.write(render(build_tree(objs, name, opts), color=bool(color)))


# -- waiting -----------------------------------------------------------------------------------------

WaitOpt = Annotated[str, typer.Option(
    "--wait", help="How long to wait: a duration such as 90s, 5m, 1h30m (0: do not wait).")]


def duration(text: str, flag: str = "--wait") -> float:
    from capd_py.cli.progress import parse_duration
    try:
        return parse_duration(text)
    except ValueError as e:
        fail(f"{flag}: {e}", 2)


def wait_available(kubeconfig: str | None, namespace: str, name: str, timeout: float, steps: Steps) -> None:
    """Until the Cluster is Available, showing which machines are pending and why (live on a terminal)."""
    from capd_py.cli.progress import progress_lines
    kube = connect(kubeconfig)

    async def go() -> str | None:
        last = ""

        async def available() -> str | None:
            # "" once Available, an error message when it cannot become so, None to keep waiting
            nonlocal last
            c = await kube.get(CLUSTER, namespace, name)
            if c is None:
                return f"cluster {namespace}/{name} disappeared"
            if conditions.is_true(c, conditions.AVAILABLE):
                return ""
            lines = progress_lines(c, await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name}))
            last = lines[0] if lines else ""
            steps.details(lines)
            return None
        try:
            out = await apoll(available, timeout, 1)
        finally:
            kube.close()
        if out is None:
            return f"cluster {namespace}/{name} not Available after {timeout:.0f}s" + (f": {last}" if last else "")
        return out or None
    err = run_async(go)
    if err:
        fail(err + f" (see `capd-py describe cluster {name} -n {namespace}`)")


def wait_deleted(kubeconfig: str | None, namespace: str, name: str, timeout: float) -> None:
    kube = connect(kubeconfig)

    async def go() -> bool:
        async def gone() -> bool | None:
            return True if await kube.get(CLUSTER, namespace, name) is None else None
        try:
            return bool(await apoll(gone, timeout, 1))
        finally:
            kube.close()
    if not run_async(go):
        fail(f"cluster {namespace}/{name} still exists after {timeout:.0f}s")


# -- delete --------------------------------------------------------------------------------------------

@delete_app.command("cluster")
def delete_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    wait: WaitOpt = "10m",
    no_wait: Annotated[bool, typer.Option("--no-wait", help="Return once the deletion is requested.")] = False,
    timeout: Annotated[str | None, typer.Option(hidden=True, help="Old spelling of --wait.")] = None,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Delete a workload cluster (the controllers remove its machines and containers); waits until every object
    is gone unless --no-wait or --wait 0."""
    from capd_py.cli.kubeconfig import remove_if_for, secret_kubeconfig
    seconds = 0.0 if no_wait else duration(timeout, "--timeout") if timeout else duration(wait)
    steps = Steps()
    kube = connect(kubeconfig)

    async def go() -> tuple[bool, str | None]:
        from capd_py.api.labels import POWER_STATE_ANNOTATION
        from capd_py.reconcile.powerstate import delete_refusal
        try:
            current = await kube.get(CLUSTER, namespace, name)
            refusal = delete_refusal(name, ((current or {}).get("metadata", {}).get("annotations") or {})
                                     .get(POWER_STATE_ANNOTATION))
            if refusal:
                steps.end(False)
                fail(refusal)
            # read before the deletion: the controllers remove the Secret with the cluster
            secret = await secret_kubeconfig(kube, namespace, name)
            return bool(await kube.delete(CLUSTER, namespace, name)), secret
        finally:
            kube.close()
    with steps.step(f"Deleting cluster {namespace}/{name} 🔥"):
        deleted, secret = run_async(go)
        if not deleted:
            steps.end(False)
            fail(f"cluster {namespace}/{name} not found")
        # the admin credentials `quickstart` wrote go with the cluster (kind removes its kubeconfig context)
        written = mgmt.home() / f"{name}.kubeconfig"
        if remove_if_for(written, secret):
            steps.info(f"removed {written}")
        if seconds > 0:
            wait_deleted(kubeconfig, namespace, name, seconds)


@delete_app.command("management")
def delete_management(
    name: Annotated[str, typer.Option("--name", help="Management cluster name.")] = mgmt.DEFAULT_NAME,
) -> None:
    """Delete the management cluster: its controllers process, containers and volumes."""
    steps = Steps()
    try:
        with steps.step(f"Deleting management cluster {name!r} 🔥"):
            found = mgmt.ManagementCluster(name=name, steps=steps).delete()
    except Exception as e:  # noqa: BLE001 - report, exit 1
        fail(str(e))
    if not found:
        steps.info(f"nothing to delete for management cluster {name!r}")


@delete_app.command("all")
def delete_all(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete every capd-py container, network and volume on this host (by labels), and stop the controllers.
    Clusters the local management clusters placed on other docker hosts are deleted there first (only theirs)."""
    from capd_py.cli import cleanup
    if not yes and sys.stdin.isatty() and not typer.confirm("Delete every capd-py container, network and volume?"):
        raise typer.Exit(1)
    steps = Steps()
    rt = mgmt.default_runtime()
    remotes, problems = cleanup.find_remotes(rt)
    left: list[str] = []
    if remotes:
        with steps.step("Deleting the clusters placed on other docker hosts 🔥"):
            remote_counts, left = cleanup.delete_remote(remotes)
        for r in remotes:
            if r.runtime is not None:
                typer.echo(f"docker host {r.host}: deleted cluster(s) {', '.join(r.clusters)}")
    with steps.step("Deleting every capd-py container, network and volume 🔥"):
        try:
            counts = cleanup.delete_everything(rt)
        except Exception as e:  # noqa: BLE001
            steps.end(False)
            fail(str(e))
    if remotes:
        counts = {k: v + remote_counts[k] for k, v in counts.items()}
    typer.echo(f"deleted {counts['containers']} container(s), {counts['networks']} network(s), "
               f"{counts['volumes']} volume(s)")
    for line in problems + left:
        steps.info(f"WARNING: {line}")
    if left:
        raise typer.Exit(1)  # something the user asked to delete still runs somewhere


# -- stop / start / pause / resume (capd_py/cli/power.py, decisions in capd_py/reconcile/powerstate.py) -------------

stop_app = typer.Typer(no_args_is_help=True, help="Stop a workload cluster's containers (paused for the controllers).")
start_app = typer.Typer(no_args_is_help=True, help="Start a stopped workload cluster again.")
pause_app = typer.Typer(no_args_is_help=True, help="Freeze a workload cluster's containers (docker pause: no CPU).")
resume_app = typer.Typer(no_args_is_help=True, help="Thaw a paused workload cluster.")
app.add_typer(stop_app, name="stop")
app.add_typer(start_app, name="start")
app.add_typer(pause_app, name="pause")
app.add_typer(resume_app, name="resume")

_POWER_TITLES = {"stop": "Stopping", "start": "Starting", "pause": "Pausing", "resume": "Resuming"}


def _power(verb: str, name: str, namespace: str, wait: str, kubeconfig: str | None, stop_timeout: float = 10.0) -> None:
    from capd_py.cli import hosts as hc
    from capd_py.cli.power import PowerError, command
    seconds = duration(wait)
    steps = Steps()
    kube = connect(kubeconfig)
    steps.info(f"{_POWER_TITLES[verb]} cluster {namespace}/{name} ...")
    try:
        # the cluster's docker host, not the local daemon (docs/multihost.md)
        _host, rt = run_async(lambda: _with_kube(kubeconfig, lambda k: hc.cluster_runtime(k, namespace, name)))
        message = run_async(lambda: command(kube, rt, verb, namespace, name, steps,
                                            seconds if seconds > 0 else 3600.0, stop_timeout))
    except PowerError as e:
        fail(f"{verb} cluster {namespace}/{name}: {e} (run the command again to continue)")
    except hc.HostError as e:
        fail(f"{verb} cluster {namespace}/{name}: {e}")
    typer.echo(f"cluster {namespace}/{name}: {message}")


PowerWaitOpt = Annotated[str, typer.Option("--wait", help="How long the whole command may take (a duration).")]


@stop_app.command("cluster")
def stop_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "5m",
    stop_timeout: Annotated[float, typer.Option(
        "--stop-timeout", min=0, help="Seconds each container gets to shut down before it is killed.")] = 10.0,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Pause the cluster's objects for the controllers, then stop its containers (workers, control planes, load
    balancer last). Run it again after an interruption: it continues."""
    _power("stop", name, namespace, wait, kubeconfig, stop_timeout)


@start_app.command("cluster")
def start_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "5m",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Start a stopped cluster's containers (load balancer first), wait for Ready nodes, unpause, wait for
    Available."""
    _power("start", name, namespace, wait, kubeconfig)


@pause_app.command("cluster")
def pause_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "5m",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Pause the cluster's objects for the controllers, then freeze its containers (cgroup freezer)."""
    _power("pause", name, namespace, wait, kubeconfig)


@resume_app.command("cluster")
def resume_cluster(
    name: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "5m",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Thaw a paused cluster's containers, wait for Ready nodes, unpause, wait for Available."""
    _power("resume", name, namespace, wait, kubeconfig)


@stop_app.command("management")
def stop_management(
    name: Annotated[str, typer.Option("--name", help="Management cluster name.")] = mgmt.DEFAULT_NAME,
    stop_timeout: Annotated[float, typer.Option("--stop-timeout", min=0)] = 10.0,
) -> None:
    """Stop the management cluster made by `capd-py init`: its host controllers, then its node container
    (workload clusters keep running, unmanaged). `start management` brings both back."""
    from capd_py.runtime.protocol import RuntimeError_
    steps = Steps()
    try:
        mgmt.ManagementCluster(name=name, steps=steps).stop(stop_timeout)
    except (mgmt.ManagementError, RuntimeError_) as e:
        fail(str(e))
    typer.echo(f"management cluster {name}: stopped")


@start_app.command("management")
def start_management(
    name: Annotated[str, typer.Option("--name", help="Management cluster name.")] = mgmt.DEFAULT_NAME,
    wait: PowerWaitOpt = "5m",
) -> None:
    """Start a stopped management cluster: its node container, then (when they ran at the stop) its host
    controllers."""
    from capd_py.runtime.protocol import RuntimeError_
    steps = Steps()
    try:
        mgmt.ManagementCluster(name=name, steps=steps, ready_timeout=duration(wait)).start()
    except (mgmt.ManagementError, RuntimeError_) as e:
        fail(str(e))
    typer.echo(f"management cluster {name}: running")


# -- snapshots (capd_py/cli/snapshot.py, capd_py/reconcile/snapshot.py) ---------------------------------------

snapshot_app = typer.Typer(no_args_is_help=True, help="Snapshots of a workload cluster's containers (stopped).")
app.add_typer(snapshot_app, name="snapshot")


def _local_only(what: str, kubeconfig: str | None, namespace: str, cluster: str) -> None:
    """Snapshots copy container storage out of the local daemon's data root: a cluster on another docker host
    (docs/multihost.md) is refused with that reason, not searched for on the wrong daemon."""
    host = _cluster_host(kubeconfig, namespace, cluster)
    if host != "local":
        fail(f"{what}: cluster {namespace}/{cluster} is on docker host {host!r}; snapshots read the container "
             "storage of the local docker daemon only")


def _snapshots_root() -> Path:
    return mgmt.home() / "snapshots"


@snapshot_app.command("create")
def snapshot_create(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    name: Annotated[str, typer.Option("--name", help="Snapshot name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "10m",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Stop the cluster, copy every container's storage (writable layer and volumes: etcd, containerd, kubelet)
    under the capd-py home, start it again if it was running. Prints the folder and its size."""
    from capd_py.cli import snapshot as snap
    from capd_py.reconcile.snapshot import human
    steps = Steps()
    _local_only("snapshot create", kubeconfig, namespace, cluster)
    kube = connect(kubeconfig)
    try:
        dest, size = run_async(lambda: snap.create(kube, mgmt.default_runtime(), _snapshots_root(), namespace,
                                                   cluster, name, steps, duration(wait)))
    except snap.SnapshotError as e:
        fail(f"snapshot create {name}: {e}")
    finally:
        kube.close()
    typer.echo(f"{dest}\t{human(size)}")


@snapshot_app.command("restore")
def snapshot_restore(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    name: Annotated[str, typer.Argument(help="Snapshot name.")],
    namespace: NamespaceOpt = "default",
    wait: PowerWaitOpt = "10m",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Put the cluster back to the snapshot in place: stop it, make its containers' storage the snapshot's again,
    start it (Available, Ready nodes). Run it again after an interruption."""
    from capd_py.cli import snapshot as snap
    steps = Steps()
    _local_only("snapshot restore", kubeconfig, namespace, cluster)
    kube = connect(kubeconfig)
    try:
        run_async(lambda: snap.restore(kube, mgmt.default_runtime(), _snapshots_root(), namespace, cluster, name,
                                       steps, duration(wait)))
    except snap.SnapshotError as e:
        fail(f"snapshot restore {name}: {e}")
    finally:
        kube.close()
    typer.echo(f"cluster {namespace}/{cluster}: restored to snapshot {name}")


@snapshot_app.command("list")
def snapshot_list(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    namespace: NamespaceOpt = "default",
) -> None:
    """The cluster's snapshots: name, creation time, size, complete or not."""
    from capd_py.cli import snapshot as snap
    from capd_py.cli.listing import table
    from capd_py.reconcile.snapshot import human
    rows: list[tuple[str, ...]] = [(x.name, x.created, human(x.size),
                                    "yes" if x.complete else "no (interrupted: delete it)")
            for x in snap.listing(_snapshots_root(), namespace, cluster)]
    if not rows:
        sys.stderr.write(f"No snapshots of {namespace}/{cluster}.\n")
        return
    sys.stdout.write(table(("NAME", "CREATED", "SIZE", "COMPLETE"), rows))


@snapshot_app.command("delete")
def snapshot_delete(
    cluster: Annotated[str, typer.Argument(help="Cluster name.")],
    name: Annotated[str, typer.Argument(help="Snapshot name.")],
    namespace: NamespaceOpt = "default",
) -> None:
    """Remove a snapshot (complete or not)."""
    from capd_py.cli import snapshot as snap
    if not snap.delete(_snapshots_root(), namespace, cluster, name):
        fail(f"no snapshot {name} of {namespace}/{cluster}")
    typer.echo(f"deleted snapshot {name} of {namespace}/{cluster}")


# -- init / controllers / quickstart -------------------------------------------------------------------

def do_init(name: str, image: str, port: int, in_cluster: bool, controllers: bool, steps: Steps,
            ready_timeout: float = 300.0, for_clusterctl: bool = False) -> Path:
    from capd_py.runtime.protocol import RuntimeError_
    try:  # a bad EXP_* / CAPD_PY_FEATURE_GATES value is a usage error before anything is created
        mgmt.feature_gates()
    except mgmt.ManagementError as e:
        fail(str(e), 2)
    m = mgmt.ManagementCluster(name=name, image=image, host_port=port, steps=steps,
                               mount_docker_socket=in_cluster or for_clusterctl, ready_timeout=ready_timeout)
    try:
        kc = m.create()
        if for_clusterctl:  # what the core provider's Deployment needs; clusterctl installs everything else
            with steps.step("Loading the controllers image 🖼"):
                mgmt.load_image_into_node(m.rt, m.node, mgmt.build_controllers_image(m.rt))
            return kc
        with steps.step("Installing capd-py CRDs 📜"):
            url = None if in_cluster else mgmt.host_webhook_url(kc, m.gateway())
            mgmt.install_crds(kc, webhook_url=url, webhook_service=in_cluster)
        if in_cluster:
            with steps.step("Deploying controllers in the cluster 🎮"):
                mgmt.deploy_in_cluster(m)
        elif controllers:
            with steps.step("Starting controllers 🎮"):
                pid = mgmt.start_controllers(kc, name)
                # writes of capd-py's kinds go through the admission webhook they serve: ready when it listens
                mgmt.wait_webhook(url)
            steps.info(f"controllers running as pid {pid}, logs in {mgmt.log_path(name)}")
    except (mgmt.ManagementError, RuntimeError_) as e:
        fail(str(e))
    return kc


@app.command()
def init(
    name: Annotated[str | None, typer.Option("--name", help="Management cluster name (default capd-mgmt; "
                                             "with --kubeconfig: ext-<hash of its path>).")] = None,
    image: Annotated[str, typer.Option("--image", help="Node image.")] = mgmt.DEFAULT_NODE_IMAGE,
    port: Annotated[int, typer.Option("--port", min=0, max=65535,
                                      help="Host port for the API server on 127.0.0.1 (0: any free).")] = 0,
    in_cluster: Annotated[bool, typer.Option("--in-cluster", help="Run the controllers as a Deployment "
                                             "in the management cluster instead of a host process.")] = False,
    controllers: Annotated[bool, typer.Option("--controllers/--no-controllers",
                                              help="Start the controllers.")] = True,
    kubeconfig: Annotated[Path | None, typer.Option(
        "--kubeconfig", help="Make this existing cluster a management cluster (CRDs + host controllers) "
        "instead of creating one, e.g. a workload cluster to become self-hosted.")] = None,
    wait: Annotated[str, typer.Option("--wait", help="How long to wait for the management node to be Ready "
                                      "(a duration: 90s, 5m, ...).")] = "5m",
    webhook_url: Annotated[str | None, typer.Option(
        "--webhook-url", help="With --kubeconfig: serve v1beta1 through the conversion webhook of the host "
        "controllers at this URL (https://ADDRESS:PORT/convert, ADDRESS: this host as the cluster's API server "
        "reaches it). Default: the URL the cluster's CRDs name already, else v1beta2 only.")] = None,
    webhook_bind_address: Annotated[str | None, typer.Option(
        "--webhook-bind-address", help="With --kubeconfig: the address the webhook listens on, when the URL's "
        "is not one of this host's (NAT, a DNS name).")] = None,
    for_clusterctl: Annotated[bool, typer.Option(
        "--for-clusterctl", help="Create the management cluster and install nothing in it, for upstream `clusterctl "
        "init --config $(capd-py clusterctl repository DIR)`: the node gets the docker socket and the controllers "
        "image the core provider's Deployment runs (docs/clusterctl.md).")] = False,
) -> None:
    """Create the management cluster, install the CRDs and start the controllers."""
    ready_timeout = duration(wait)
    steps = Steps()
    if for_clusterctl and kubeconfig is not None:
        fail("--for-clusterctl creates the management cluster (not with --kubeconfig: run clusterctl init on it)", 2)
    if kubeconfig is not None:
        from capd_py.cli.existing import default_name, init_existing
        if in_cluster:
            fail("--in-cluster needs the management cluster capd-py creates (not with --kubeconfig)", 2)
        if not kubeconfig.expanduser().is_file():
            fail(f"kubeconfig {kubeconfig} does not exist", 2)
        kc = kubeconfig.expanduser().resolve()
        if webhook_url is not None:
            from urllib.parse import urlsplit
            parts = urlsplit(webhook_url)
            if parts.scheme != "https" or not parts.hostname or parts.path != "/convert":
                fail(f"--webhook-url {webhook_url}: expected https://ADDRESS:PORT/convert", 2)
        try:
            init_existing(kc, name or default_name(kc), controllers, steps, webhook_url, webhook_bind_address)
        except mgmt.ManagementError as e:
            fail(str(e))
        typer.echo(str(kc))
        return
    if webhook_url or webhook_bind_address:
        fail("--webhook-url and --webhook-bind-address go with --kubeconfig (capd-py init finds its own)", 2)
    name = name or mgmt.DEFAULT_NAME
    steps.info(f"Creating management cluster {name!r} ...")
    kc = do_init(name, image, port, in_cluster, controllers, steps, ready_timeout, for_clusterctl)
    typer.echo(str(kc))
    if for_clusterctl:
        steps.info(f"\nInstall capd-py with:\n\n  clusterctl init --infrastructure docker --kubeconfig {kc} "
                   "--config $(capd-py clusterctl repository DIR)\n")
    else:
        steps.info(f"\nUse it with:\n\n  kubectl --kubeconfig {kc} get clusters -A\n")


@app.command()
def move(
    to_kubeconfig: Annotated[Path | None, typer.Option(
        "--to-kubeconfig", help="The target management cluster's kubeconfig.")] = None,
    namespace: NamespaceOpt = "default",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the objects that would move (a tree) "
                                          "and change nothing.")] = False,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Move a namespace's clusters to another management cluster (clusterctl move); they keep running."""
    from capd_py.cli.move import MoveError, command
    if to_kubeconfig is None and not dry_run:
        fail("--to-kubeconfig is required (or --dry-run)", 2)
    target = str(management_kubeconfig(str(to_kubeconfig))) if to_kubeconfig else None
    source = connect(kubeconfig)
    try:
        lines = run_async(lambda: command(source, connect(target) if target else None, namespace, dry_run, Steps()))
    except MoveError as e:
        fail(str(e))
    for line in lines:
        typer.echo(line)


@app.command("controllers")
def controllers_cmd(
    kubeconfig: Annotated[str | None, typer.Option("--kubeconfig", envvar="CAPD_PY_KUBECONFIG",
                                                   help="Management cluster kubeconfig.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    threads: Annotated[int, typer.Option(min=4, help="Threads for blocking Kube/Docker calls.")] = 64,
    leader_elect: Annotated[bool, typer.Option(
        "--leader-elect/--no-leader-elect", envvar="CAPD_PY_LEADER_ELECT",
        help="Reconcile only while holding the Lease capd-py-controllers (several replicas, one active).")] = False,
    leader_elect_namespace: Annotated[str | None, typer.Option(
        help="Namespace of the Lease (default: $POD_NAMESPACE, else capd-py-system).")] = None,
    webhook_bind_address: Annotated[str | None, typer.Option(
        "--webhook-bind-address", envvar="CAPD_PY_WEBHOOK_BIND_ADDRESS",
        help="Address the conversion webhook listens on (default: the address in the CRDs' webhook URL when it "
             "is an IP, else every address).")] = None,
    feature_gates: Annotated[str | None, typer.Option(
        "--feature-gates", envvar="CAPD_PY_FEATURE_GATES",
        help="Upstream's feature gates, Name=true|false comma-separated (MachinePool, ClusterTopology, "
             "MachineSetPreflightChecks, MachineTaintPropagation, ...).")] = None,
    machineset_preflight_checks: Annotated[str | None, typer.Option(
        "--machineset-preflight-checks", envvar="CAPD_PY_MACHINESET_PREFLIGHT_CHECKS",
        help="MachineSet preflight checks to run, comma-separated (All, ControlPlaneIsStable, KubernetesVersionSkew, "
             "KubeadmVersionSkew, ControlPlaneVersionSkew; empty: none). Default All, as upstream.")] = None,
    controllers: Annotated[str | None, typer.Option(
        "--controllers", envvar="CAPD_PY_CONTROLLERS",
        help="Which controllers to run, comma-separated: all (default), upstream's managers (core, bootstrap, "
             "controlplane, infrastructure) or kinds (DockerMachine, ClusterTopology, ...). Runs a part of capd-py "
             "beside upstream's managers.")] = None,
) -> None:
    """Run every controller in this process (foreground), and the conversion webhook the CRDs name."""
    from capd_py.api import controllerset
    try:
        controllerset.parse(controllers)
    except ValueError as e:
        fail(str(e), 2)
    if controllers is not None:  # the Settings read it from the environment
        os.environ["CAPD_PY_CONTROLLERS"] = controllers
    if feature_gates is not None:  # the Settings read it from the environment
        os.environ["CAPD_PY_FEATURE_GATES"] = feature_gates
    if machineset_preflight_checks is not None:  # the Settings read it from the environment
        os.environ["CAPD_PY_MACHINESET_PREFLIGHT_CHECKS"] = machineset_preflight_checks
    from capd_py.cli.run import ConfigError, leader_config
    from capd_py.cli.run import main as run_main
    from capd_py.controllers.operator import LeadershipLost
    try:
        run_main(kubeconfig, verbose=verbose, threads=threads,
                 leader_election=leader_config(leader_elect_namespace, None) if leader_elect else None,
                 webhook_bind=webhook_bind_address)
    except (FileNotFoundError, ConfigError) as e:
        fail(str(e), 2)
    except LeadershipLost as e:
        fail(f"leader election: {e}")
    except KeyboardInterrupt:
        pass


@app.command()
def quickstart(
    name: Annotated[str, typer.Argument(help="Workload cluster name.")] = "capi-quickstart",
    namespace: NamespaceOpt = "default",
    kubernetes_version: Annotated[str | None, typer.Option()] = None,
    control_plane_machine_count: Annotated[int, typer.Option(min=1)] = 1,
    worker_machine_count: Annotated[int, typer.Option(min=0)] = 1,
    wait: Annotated[str, typer.Option("--wait", help="How long to wait for the cluster to be Available "
                                      "(a duration: 90s, 15m, ...).")] = "15m",
    timeout: Annotated[str | None, typer.Option(hidden=True, help="Old spelling of --wait (seconds).")] = None,
    management_name: Annotated[str, typer.Option("--management-name")] = mgmt.DEFAULT_NAME,
    flavor: FlavorOpt = None,
) -> None:
    """init + generate + apply + wait for Available + write the workload kubeconfig."""
    # render first: a bad flavor or value is a usage error before anything is created
    text = _generate(name, namespace, kubernetes_version, control_plane_machine_count, worker_machine_count,
                     None, None, None, flavor)
    steps = Steps()
    kc = do_init(management_name, mgmt.DEFAULT_NODE_IMAGE, 0, False, True, steps)
    with steps.step(f"Applying cluster {namespace}/{name} 📜"):
        if apply_text(str(kc), text, namespace, results_to_stderr=True):
            steps.end(False)
            fail("the cluster objects were rejected")
    with steps.step(f"Waiting for cluster {name} to be Available ⏳"):
        wait_available(str(kc), namespace, name, duration(timeout, "--timeout") if timeout else duration(wait), steps)
    with steps.step("Writing the workload kubeconfig 📝"):
        from capd_py.cli.kubeconfig import write_private
        out = write_private(mgmt.home() / f"{name}.kubeconfig", fetch_kubeconfig(str(kc), namespace, name))
    typer.echo(str(out))
    steps.info(f"\nYou can now use your cluster with:\n\n  kubectl --kubeconfig {out} get nodes\n\n"
               f"and see it from the management cluster with:\n\n  capd-py describe cluster {name}"
               + (f" -n {namespace}" if namespace != "default" else "")
               + (f" --kubeconfig {kc}" if management_name != mgmt.DEFAULT_NAME else "") + "\n")


# -- load image / export logs (capd_py/cli/loadimage.py, exportlogs.py) ------------------------------------

load_app = typer.Typer(no_args_is_help=True, help="Load local images into a workload cluster's nodes.")
export_app = typer.Typer(no_args_is_help=True, help="Export data about clusters.")
app.add_typer(load_app, name="load")
app.add_typer(export_app, name="export")
app.add_typer(extension_app, name="extension")
app.add_typer(clusterctl_app, name="clusterctl")
host_app = typer.Typer(no_args_is_help=True, help="Docker hosts workload clusters are placed on (docs/multihost.md).")
app.add_typer(host_app, name="host")


def _read_file(path: str | None, flag: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as e:
        fail(f"{flag}: {e}", 2)


@host_app.command("add")
def host_add(
    name: Annotated[str, typer.Argument(help="Host name (a lowercase RFC 1123 label).")],
    endpoint: Annotated[str, typer.Option("--endpoint", help="unix:///path, tcp://HOST:PORT or ssh://[USER@]HOST.")],
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="KEY=VALUE (repeatable).")] = None,
    max_clusters: Annotated[int, typer.Option("--max-clusters", help="Capacity in clusters (0: no limit).")] = 0,
    address: Annotated[str, typer.Option("--address", help="Where the management cluster reaches its published "
                                         "ports (default: the endpoint's host; none for unix://).")] = "",
    tls_ca: Annotated[str | None, typer.Option("--tls-ca", help="tcp://: CA certificate file.")] = None,
    tls_cert: Annotated[str | None, typer.Option("--tls-cert", help="tcp://: client certificate file.")] = None,
    tls_key: Annotated[str | None, typer.Option("--tls-key", help="tcp://: client key file.")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="tcp:// without TLS.")] = False,
    ssh_key: Annotated[str | None, typer.Option(
        "--ssh-key", help="ssh://: private key file (with --ssh-known-hosts; else the ssh configuration of the "
        "machine the controllers run on applies).")] = None,
    ssh_known_hosts: Annotated[str | None, typer.Option(
        "--ssh-known-hosts", help="ssh://: known_hosts file holding the host's key.")] = None,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Add (or replace) a docker host in capd-py-system/capd-py-docker-hosts; TLS files, or an ssh key and
    known_hosts, go into a Secret."""
    from capd_py.api import dockerhosts as dh
    from capd_py.cli import hosts as hc
    files = {"ca.pem": _read_file(tls_ca, "--tls-ca"), "cert.pem": _read_file(tls_cert, "--tls-cert"),
             "key.pem": _read_file(tls_key, "--tls-key")}
    given = {k: v for k, v in files.items() if v is not None}
    if given and len(given) != 3:
        fail("--tls-ca, --tls-cert and --tls-key go together", 2)
    ssh_files = {"ssh-privatekey": _read_file(ssh_key, "--ssh-key"),
                 "known_hosts": _read_file(ssh_known_hosts, "--ssh-known-hosts")}
    ssh_given = {k: v for k, v in ssh_files.items() if v is not None}
    if ssh_given and len(ssh_given) != 2:
        fail("--ssh-key and --ssh-known-hosts go together", 2)
    try:
        labels = dh.parse_selector(",".join(label or []))
        host = dh.DockerHost(name, endpoint, hc.tls_secret_name(name) if given else "", labels, max_clusters,
                             insecure, address or dh.default_address(endpoint),
                             hc.ssh_secret_name(name) if ssh_given else "")
        dh.parse_host(name, host.to_data())
    except dh.HostConfigError as e:
        fail(str(e), 2)
    try:
        replaced = run_async(lambda: _with_kube(kubeconfig, lambda k: hc.add(k, host, given or ssh_given or None)))
    except hc.HostError as e:
        fail(str(e))
    sys.stderr.write(f" ✓ docker host {name} {'replaced' if replaced else 'added'} ({endpoint})\n")


@host_app.command("list")
def host_list(
    ping: Annotated[bool, typer.Option("--ping", help="Ask each daemon whether it answers.")] = False,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """The configured docker hosts (`local` always), with the clusters placed on each."""
    from rich.console import Console
    from rich.table import Table

    from capd_py.cli import hosts as hc
    try:
        rows = run_async(lambda: _with_kube(kubeconfig, hc.listing))
    except hc.HostError as e:
        fail(str(e))
    table = Table(box=None, pad_edge=False)
    for col in ("NAME", "ENDPOINT", "ADDRESS", "LABELS", "CAPACITY", "CLUSTERS", *(["REACHABLE"] if ping else [])):
        table.add_column(col)
    for r in rows:
        h = r.host
        cells = [h.name, h.endpoint or "(DOCKER_HOST / local socket)", h.address or "-",
                 ",".join(f"{k}={v}" for k, v in sorted(h.labels.items())) or "-",
                 str(h.max_clusters or "-"), str(len(r.clusters))]
        if ping:
            cells.append(_ping_host(kubeconfig, h.name))
        table.add_row(*cells)
    Console(width=200).print(table)


def _ping_host(kubeconfig: str | None, name: str) -> str:
    from capd_py.cli import hosts as hc
    from capd_py.runtime.protocol import RuntimeError_
    try:
        rt = run_async(lambda: _with_kube(kubeconfig, lambda k: hc.runtime_of(k, name)))
        rt.ping()
        return "yes"
    except (hc.HostError, RuntimeError_) as e:
        return f"no: {e}"


def _cluster_runtime(kubeconfig: str | None, namespace: str, cluster: str,
                     local_without_management: bool = False) -> tuple[str, Any]:
    """(docker host, runtime) of a workload cluster (docs/multihost.md). `local_without_management`: when the
    management cluster cannot be read, the local daemon (export logs still collects the containers, as before)."""
    from capd_py.cli import hosts as hc
    try:
        return asyncio.run(_with_kube(kubeconfig, lambda k: hc.cluster_runtime(k, namespace, cluster)))
    except hc.HostError as e:
        fail(str(e))
    except Exception:
        if local_without_management:
            return "local", mgmt.default_runtime()
        raise


def _cluster_host(kubeconfig: str | None, namespace: str, cluster: str) -> str:
    """The docker host of a cluster; `local` when the management cluster cannot say (loading into a local
    cluster's nodes works without it, as before docker hosts existed)."""
    from capd_py.cli import hosts as hc
    try:
        return asyncio.run(_with_kube(kubeconfig, lambda k: hc.cluster_host(k, namespace, cluster)))
    except Exception:  # noqa: BLE001 - no management cluster: the local daemon, as before
        return "local"


@host_app.command("remove")
def host_remove(
    name: Annotated[str, typer.Argument(help="Host name.")],
    force: Annotated[bool, typer.Option("--force", help="Even while clusters are placed on it.")] = False,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Remove a docker host from the configuration (refused while clusters are placed on it)."""
    from capd_py.cli import hosts as hc
    try:
        run_async(lambda: _with_kube(kubeconfig, lambda k: hc.remove(k, name, force)))
    except hc.HostError as e:
        fail(str(e))
    sys.stderr.write(f" ✓ docker host {name} removed\n")


@load_app.command("image")
def load_image(
    images: Annotated[list[str], typer.Argument(help="Local docker image references (nothing is pulled).")],
    cluster: Annotated[str | None, typer.Option("--cluster", help="Workload cluster name.")] = None,
    nodes: Annotated[str | None, typer.Option("--nodes", help="Only these node containers (comma-separated); "
                                              "the images are then not recorded for new nodes.")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Without --cluster: copy the images into this docker "
                                             "host's daemon (docker save | docker load), for clusters placed "
                                             "there later.")] = None,
    source: Annotated[str, typer.Option("--from", help="The docker host that has the images.")] = "local",
    namespace: NamespaceOpt = "default",
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Load images into every node's containerd (like kind load docker-image); nodes with the same image ID are
    skipped. Recorded on the Cluster, so machines created later get them too. stdout: NODE IMAGE RESULT.
    A cluster placed on another docker host gets the images copied to that host's daemon first."""
    from capd_py.cli import hosts as hc
    from capd_py.cli import loadimage as li
    from capd_py.runtime import images as rimages
    from capd_py.runtime.protocol import RuntimeError_
    if (cluster is None) == (host is None):
        fail("give --cluster (load into its nodes) or --host (copy into a docker host's daemon)", 2)
    steps = Steps()
    try:
        target = host or _cluster_host(kubeconfig, namespace, cluster or "")
        src_rt = mgmt.default_runtime() if source == "local" and host is None and target == "local" else \
            run_async(lambda: _with_kube(kubeconfig, lambda k: hc.runtime_of(k, source)))
        rt = src_rt if target == source else run_async(lambda: _with_kube(kubeconfig,
                                                                          lambda k: hc.runtime_of(k, target)))
        if rt is not src_rt:
            missing = [r for r, i in rimages.local_ids(rt, images).items() if i is None]
            li.resolve(src_rt, missing)
            for ref in missing:
                with steps.step(f"Copying {ref} from docker host {source} to {target} 🚚"):
                    rimages.copy_image(src_rt, rt, ref)
    except (hc.HostError, li.LoadImageError, RuntimeError_) as e:
        fail(str(e))
    if cluster is None:
        for ref in images:
            sys.stdout.write(f"{target}\t{ref}\tpresent\n")
        return
    try:
        ids = li.resolve(rt, images)
        targets = li.select_nodes(li.cluster_nodes(rt, namespace, cluster),
                                  [n.strip() for n in (nodes or "").split(",") if n.strip()])
    except li.LoadImageError as e:
        fail(str(e))
    if not targets:
        fail(f"no nodes found for cluster {namespace}/{cluster}")
    record_error = ""
    if not nodes:  # before loading: a machine booting meanwhile loads them itself
        try:
            with steps.step(f"Recording the image(s) on cluster {namespace}/{cluster} for new nodes 📝"):
                asyncio.run(_with_kube(kubeconfig, lambda k: li.record(k, namespace, cluster, list(ids))))
        except li.LoadImageError as e:
            record_error = str(e)
        except Exception as e:  # noqa: BLE001 - still load; say so at the end (exit 1)
            record_error = f"management cluster: {type(e).__name__}: {e}"
    with steps.step(f"Loading {len(ids)} image(s) into {len(targets)} node(s) of {namespace}/{cluster} 🖼"):
        report = li.load(rt, targets, ids, progress=steps.info)
        if not report.ok:
            steps.end(False)
    sys.stdout.write(report.table())
    if not report.ok:
        fail("loading failed on some node(s) (see above)")
    if record_error:
        fail(f"loaded, but not recorded on the Cluster (new nodes will not get it): {record_error}")


@export_app.command("logs")
def export_logs(
    name: Annotated[str, typer.Argument(help="Workload cluster name.")],
    directory: Annotated[Path | None, typer.Argument(help="Output folder (default: a new temporary one).")] = None,
    namespace: NamespaceOpt = "default",
    controllers_log: Annotated[Path | None, typer.Option(
        "--controllers-log", help="The controllers' log file (default: the one `capd-py init` writes).")] = None,
    management_name: Annotated[str, typer.Option("--management-name")] = mgmt.DEFAULT_NAME,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Nodes' bootstrap logs, journals and pod logs, docker inspect, the load balancer, the controllers' log and
    the cluster's objects, in one folder (like kind export logs); prints the folder's path."""
    import tempfile

    from capd_py.cli import exportlogs as ex
    out = directory or Path(tempfile.mkdtemp(prefix=f"capd-py-logs-{name}-"))
    try:
        objects: Any = asyncio.run(_with_kube(kubeconfig, lambda k: ex.fetch_objects(k, namespace, name)))
    except Exception as e:  # noqa: BLE001 - the docker side is still worth collecting
        objects = e
    log = controllers_log or mgmt.log_path(management_name)
    steps = Steps()
    host, rt = _cluster_runtime(kubeconfig, namespace, name, local_without_management=True)
    try:
        with steps.step(f"Exporting logs of cluster {namespace}/{name} 📦"):
            report = ex.export(rt, namespace, name, out, objects,
                               log if (controllers_log or log.exists()) else None,
                               mgmt.node_name(management_name), version=_version_text(), progress=steps.update,
                               management_runtime=mgmt.default_runtime(), host="" if host == "local" else host)
    except ex.ExportError as e:
        fail(str(e))
    for err in report.errors:
        steps.info(f"WARNING: {err}")
    typer.echo(str(out))


async def _with_kube(kubeconfig: str | None, fn: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
    """fn(kube) with a management cluster client that is closed afterwards; errors propagate (callers that
    can go on without the management cluster catch them)."""
    from capd_py.kube.client import Kube
    kube = Kube.from_kubeconfig(management_kubeconfig(kubeconfig))
    try:
        return await fn(kube)
    finally:
        kube.close()


def _version_text() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try:
        return f"capd-py {dist_version('capd-py')}"
    except PackageNotFoundError:
        return "capd-py unknown"


def main() -> None:
    # typer/click exit 2 on usage errors already; make sure nothing else escapes as a traceback-with-0.
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    from capd_py.cli.progress import normalize_wait
    sys.argv[1:] = normalize_wait(sys.argv[1:])
    app()


if __name__ == "__main__":
    main()
