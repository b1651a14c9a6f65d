"""The ``slurm-image`` command line (cli.md). Parses, calls use cases, prints."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, NoReturn

import typer

from slurm_image.application.observe import LifecycleStatus
from slurm_image.domain import paths
from slurm_image.domain.profile import ProfileSelection, SiteProfile
from slurm_image.domain.request import Operation, make_request
from slurm_image.entrypoints.container import build_container, require_submitter
from slurm_image.entrypoints.doctor_command import doctor_command
from slurm_image.entrypoints.errors import EXIT_INTERNAL, EXIT_INVALID, describe, exit_code_for
from slurm_image.entrypoints.profile_loader import load_profile, profile_path

PROG = "slurm-image"
SUBMITTED = "SUBMITTED"


@dataclass
class Options:
    profile: str | None
    cluster: str | None
    json: bool
    quiet: bool
    verbose: bool


class CommandFailed(Exception):
    """An error already mapped to an exit code, with an optional hint on what to do next."""

    def __init__(self, error: BaseException, hint: str | None = None) -> None:
        self.error = error
        self.hint = hint
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


def _load(options: Options) -> tuple[SiteProfile, ProfileSelection]:
    return load_profile(profile_path(options.profile, os.environ), cluster=options.cluster)


def _lifecycle_command(
    ctx: typer.Context,
    operation: Operation,
    source: str,
    name: str,
    role: str,
    flags: LifecycleFlags,
) -> None:
    """Validate everything (profile, request, submitter) before the first file is created."""
    options = _options(ctx, flags.json_output)
    try:
        profile, selection = _load(options)
        request = make_request(operation, name=name, role=role, source=source)
        container = build_container(profile)
        if flags.dry_run:
            planned = container.plan_lifecycle()(request, profile, selection)
        else:
            if not flags.no_submit:
                require_submitter(container, profile)
            prepared = container.prepare()(request, profile, selection)
    except Exception as error:
        raise CommandFailed(error) from error
    if flags.dry_run:
        plan_data = planned.plan.model_dump(mode="json")
        human = (
            f"lifecycle {planned.plan.lifecycle_id} (dry run: nothing created)\n"
            f"plan:\n{planned.plan.canonical_bytes().decode()}"
            f"script:\n{planned.script}"
        )
        _emit(options, {"plan": plan_data, "script": planned.script}, human.rstrip("\n"))
        return
    if flags.no_submit:
        _emit(
            options,
            {"lifecycle_id": prepared.lifecycle_id, "job_directory": prepared.job_directory},
            f"lifecycle {prepared.lifecycle_id} staged in {prepared.job_directory}\n"
            f"submit it with: {PROG} submit {prepared.lifecycle_id}",
        )
        return
    try:
        submission = container.submit()(prepared)
    except Exception as error:
        hint = (
            f"lifecycle {prepared.lifecycle_id} stays staged in {prepared.job_directory};"
            f" retry with: {PROG} submit {prepared.lifecycle_id}"
        )
        raise CommandFailed(error, hint) from error
    _emit_submission(options, submission.lifecycle_id, submission.job_id)


def _emit_submission(options: Options, lifecycle_id: str, job_id: str) -> None:
    _emit(
        options,
        {"lifecycle_id": lifecycle_id, "job_id": job_id, "state": SUBMITTED},
        f"lifecycle {lifecycle_id} submitted as job {job_id}",
    )


@dataclass(frozen=True)
class LifecycleFlags:
    dry_run: bool
    no_submit: bool
    json_output: bool


NameOption = Annotated[str, typer.Option("--name", help="Alias to publish under.")]
RoleOption = Annotated[str, typer.Option("--role", help="client or serving.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print plan and script only.")]
NoSubmitOption = Annotated[
    bool, typer.Option("--no-submit", help="Stage only; submit later with `submit ID`.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]


@app.command("import")
def import_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="registry/repo[:tag]@sha256:<64 hex>")],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    no_submit: NoSubmitOption = False,
    json_output: JsonOption = False,
) -> None:
    """Import a digest-pinned OCI image into a verified .sqsh and inspect it."""
    flags = LifecycleFlags(dry_run, no_submit, json_output)
    _lifecycle_command(ctx, "import_oci", source, name, role, flags)


@app.command("inspect")
def inspect_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(help="Absolute path of an existing .sqsh")],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    no_submit: NoSubmitOption = False,
    json_output: JsonOption = False,
) -> None:
    """Inspect an existing .sqsh in place."""
    flags = LifecycleFlags(dry_run, no_submit, json_output)
    _lifecycle_command(ctx, "inspect_sqsh", source, name, role, flags)


@app.command("submit")
def submit_command(
    ctx: typer.Context,
    lifecycle_id: Annotated[str, typer.Argument(metavar="ID", help="A lifecycle id.")],
    json_output: JsonOption = False,
) -> None:
    """Verify and submit a lifecycle staged with --no-submit."""
    options = _options(ctx, json_output)
    try:
        paths.name(lifecycle_id, "lifecycle_id")
        profile, _ = _load(options)
        container = build_container(profile)
        require_submitter(container, profile)
        submission = container.submit().staged(lifecycle_id)
    except Exception as error:
        raise CommandFailed(error) from error
    _emit_submission(options, submission.lifecycle_id, submission.job_id)


@app.command("status")
def status_command(
    ctx: typer.Context,
    lifecycle_ids: Annotated[list[str], typer.Argument(metavar="ID...", help="Lifecycle ids.")],
    json_output: JsonOption = False,
) -> None:
    """Lifecycle and scheduler state, with one scheduler call for all ids."""
    options = _options(ctx, json_output)
    try:
        profile, _ = _load(options)
        container = build_container(profile)
        require_submitter(container, profile)
        statuses = container.observe()(lifecycle_ids)
    except Exception as error:
        raise CommandFailed(error) from error
    _emit(
        options,
        {"lifecycles": [status.as_dict() for status in statuses]},
        "\n".join(_describe_status(status) for status in statuses),
    )


@app.command("cancel")
def cancel_command(
    ctx: typer.Context,
    lifecycle_id: Annotated[str, typer.Argument(metavar="ID", help="A lifecycle id.")],
    json_output: JsonOption = False,
) -> None:
    """Cancel the lifecycle's job."""
    options = _options(ctx, json_output)
    try:
        profile, _ = _load(options)
        container = build_container(profile)
        require_submitter(container, profile)
        status = container.cancel()(lifecycle_id)
    except Exception as error:
        raise CommandFailed(error) from error
    _emit(
        options,
        {"lifecycle_id": status.lifecycle_id, "state": status.state},
        f"lifecycle {status.lifecycle_id}: cancel requested; job {status.job_id} is {status.state}",
    )


app.command("doctor")(doctor_command)


def _describe_status(status: LifecycleStatus) -> str:
    words = [status.lifecycle_id, status.state]
    if status.job_id:
        words.insert(1, f"job {status.job_id}")
    if status.exit_code is not None:
        words.append(f"exit {status.exit_code}")
    line = "  ".join(words)
    return f"{line}  ({status.reason})" if status.reason else line


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one line on stderr and a documented exit code."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except CommandFailed as failure:
        hint = f" ({failure.hint})" if failure.hint else ""
        _fail(exit_code_for(failure.error), describe(failure.error) + hint)
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
