"""`capd-py clusterctl repository DIR`: capd-py's four providers as a local clusterctl repository, and the
clusterctl.yaml naming it, so upstream `clusterctl init --config DIR/clusterctl.yaml` installs capd-py
(docs/clusterctl.md "Installing capd-py with clusterctl")."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

clusterctl_app = typer.Typer(no_args_is_help=True,
                             help="capd-py for upstream clusterctl: its providers as a local repository.")


@clusterctl_app.command("repository")
def repository(
    directory: Annotated[Path, typer.Argument(help="Where to write the repository (created; files overwritten).")],
    image: Annotated[str | None, typer.Option(
        "--image", help="The controllers image the Deployment runs (default $CAPD_PY_CONTROLLERS_IMAGE, else "
        "capd-py/controllers:dev; never pulled: load it into the management cluster's nodes).")] = None,
) -> None:
    """Write capd-py's providers (cluster-api, kubeadm bootstrap, kubeadm control-plane, docker) as clusterctl's
    local repository layout ({provider}/{version}/ components + metadata.yaml) and print the path of the
    clusterctl.yaml naming them; pass it to `clusterctl init|upgrade|delete --config`."""
    from capd_py.cli.management import controllers_image_tag
    from capd_py.kube.components import write_repository

    if directory.exists() and not directory.is_dir():
        sys.stderr.write(f"ERROR: {directory} exists and is not a directory\n")
        raise typer.Exit(2)
    try:
        config = write_repository(directory, image=image or controllers_image_tag())
    except OSError as e:
        sys.stderr.write(f"ERROR: writing the repository failed: {e}\n")
        raise typer.Exit(1) from None
    sys.stderr.write(f"capd-py's providers written under {config.parent}\n")
    typer.echo(str(config))
