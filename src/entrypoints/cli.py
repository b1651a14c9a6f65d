"""The ``slurm-image`` command line (cli.md). Parses, calls use cases, prints."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, NoReturn

import typer

from application.prepare import PlannedLifecycle
from domain.request import Operation, make_request
from entrypoints.container import Container
from entrypoints.errors import EXIT_INTERNAL, EXIT_INVALID, describe, exit_code_for
from entrypoints.profile_loader import load_profile, profile_path

PROG = "slurm-image"


@dataclass
class Options:
    profile: str | None
    cluster: str | None
    json: bool
    quiet: bool
    verbose: bool


class CommandFailed(Exception):
    """An error already mapped to an exit code."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(describe(error))


app = typer.Typer(
    name=PROG,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Turn digest-pinned container images into verified Enroot squashfs files on Slurm.",
)


def _product_version() -> str:
    try:
        return version("slurm-image-lifecycle")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {_product_version()}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def global_options(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Option("--profile", help="Site profile (TOML).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Cluster of a catalog.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet")] = False,
    verbose: Annotated[bool, typer.Option("--verbose")] = False,
    show_version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    ctx.obj = Options(profile, cluster, json_output, quiet, verbose)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _options(ctx: typer.Context, json_output: bool) -> Options:
    options: Options = ctx.obj
    if json_output:
        options.json = True
    return options


def _emit(options: Options, payload: dict[str, Any], human: str) -> None:
    if options.json:
        typer.echo(json.dumps(payload, sort_keys=True))
    elif not options.quiet:
        typer.echo(human)


def _plan(
    options: Options, operation: Operation, source: str, name: str, role: str
) -> PlannedLifecycle:
    """Validate everything (profile, then request) and derive the plan. Creates nothing."""
    try:
        profile, selection = load_profile(
            profile_path(options.profile, os.environ), cluster=options.cluster
        )
        request = make_request(operation, name=name, role=role, source=source)
        container = Container()
        return container.plan_lifecycle()(request, profile, selection)
    except Exception as error:
        raise CommandFailed(error) from error


def _lifecycle_command(
    ctx: typer.Context,
    operation: Operation,
    source: str,
    name: str,
    role: str,
    dry_run: bool,
    json_output: bool,
) -> None:
    options = _options(ctx, json_output)
    planned = _plan(options, operation, source, name, role)
    if dry_run:
        plan_data = planned.plan.model_dump(mode="json")
        human = (
            f"lifecycle {planned.plan.lifecycle_id} (dry run: nothing created)\n"
            f"plan:\n{planned.plan.canonical_bytes().decode()}"
            f"script:\n{planned.script}"
        )
        _emit(options, {"plan": plan_data, "script": planned.script}, human.rstrip("\n"))
        return
    raise CommandFailed(NotImplementedError("staging is not available yet: use --dry-run"))


NameOption = Annotated[str, typer.Option("--name", help="Alias to publish under.")]
RoleOption = Annotated[str, typer.Option("--role", help="client or serving.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print plan and script only.")]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]


@app.command("import")
def import_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="registry/repo[:tag]@sha256:<64 hex>")],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
) -> None:
    """Import a digest-pinned OCI image into a verified .sqsh and inspect it."""
    _lifecycle_command(ctx, "import_oci", source, name, role, dry_run, json_output)


@app.command("inspect")
def inspect_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="Absolute path of an existing .sqsh")],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
) -> None:
    """Inspect an existing .sqsh in place."""
    _lifecycle_command(ctx, "inspect_sqsh", source, name, role, dry_run, json_output)


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one line on stderr and a documented exit code."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except CommandFailed as failure:
        _fail(exit_code_for(failure.error), describe(failure.error))
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        _fail(130, "interrupted")
    except typer.TyperException as error:
        _fail(EXIT_INVALID, " ".join(error.format_message().split()))
    except Exception as error:
        _fail(EXIT_INTERNAL, f"internal error: {describe(error)} (please report this)")


if __name__ == "__main__":
    main()
