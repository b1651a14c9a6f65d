"""The ``slurm-image`` command line (cli.md). Parses, calls ``Lifecycles`` (the Python API,
``entrypoints.api``), prints. At module level only the standard library, typer and the domain's
stdlib-only modules are imported: everything else (pydantic models, the container, the use
cases, the adapters, rich) is imported inside the commands that need it, so ``--help`` loads
none of it (tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

import enum
import json
import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.entrypoints.doctor_command import doctor_command
from slurm_image.entrypoints.exit_codes import EXIT_INTERNAL, EXIT_INVALID

if TYPE_CHECKING:
    from slurm_image.application.observe import LifecycleStatus
    from slurm_image.application.wait import Progress
    from slurm_image.domain.publication import AliasRecord
    from slurm_image.domain.request import Operation
    from slurm_image.entrypoints.api import Lifecycles, Outcome

PROG = "slurm-image"
log = logging.getLogger("slurm_image")


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
        from slurm_image.entrypoints.errors import describe

        self.error = error
        self.hint = hint
        super().__init__(describe(error))


class Role(enum.StrEnum):
    client = "client"
    serving = "serving"


app = typer.Typer(
    name=PROG,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Turn digest-pinned container images into verified Enroot squashfs files on Slurm.",
)


def _product_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("slurm-image-lifecycle")
    except PackageNotFoundError:
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {_product_version()}")
        raise typer.Exit(0)


class _LifecycleField(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "lifecycle_id"):
            record.lifecycle_id = "-"
        return True


def _configure_logging(verbose: bool) -> None:
    """``--verbose``: every step, with its lifecycle id, on stderr; else warnings only."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_LifecycleField())
    handler.setFormatter(logging.Formatter(f"{PROG}: [%(lifecycle_id)s] %(message)s"))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO if verbose else logging.WARNING)
    log.propagate = False


@app.callback(invoke_without_command=True)
def global_options(
    ctx: typer.Context,
    profile: Annotated[
        str | None, typer.Option("--profile", metavar="PATH", help="Site profile (TOML).")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option("--cluster", metavar="NAME", help="Cluster of a catalog.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Print only what scripts need (ids, paths).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Log every step (ids, job ids, digests) to stderr.")
    ] = False,
    show_version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True)
    ] = False,
) -> None:
    ctx.obj = Options(profile, cluster, json_output, quiet, verbose)
    _configure_logging(verbose)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _options(ctx: typer.Context, json_output: bool) -> Options:
    options: Options = ctx.obj
    if json_output:
        options.json = True
    return options


def _emit(options: Options, payload: dict[str, Any], human: str, quiet: str | None = None) -> None:
    """``--json``: the payload; ``--quiet``: only ``quiet`` (ids, paths); else ``human``."""
    if options.json:
        typer.echo(json.dumps(payload, sort_keys=True))
    elif options.quiet:
        if quiet:
            typer.echo(quiet)
    else:
        typer.echo(human)


def _lifecycles(options: Options) -> Lifecycles:
    from slurm_image.entrypoints.api import Lifecycles

    return Lifecycles.from_profile(options.profile, cluster=options.cluster)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns aligned to their widest cell, two spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [headers, *rows]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


# -- import and inspect ------------------------------------------------------------------


@dataclass(frozen=True)
class LifecycleFlags:
    dry_run: bool
    no_submit: bool
    json_output: bool
    wait: bool = False
    timeout_s: float | None = None
    replace: bool = False
    force: bool = False


def _lifecycle_command(
    ctx: typer.Context,
    operation: Operation,
    source: str,
    name: str,
    role: str,
    flags: LifecycleFlags,
) -> None:
    """Validate everything (profile, request, submitter) before the first file is created."""
    from slurm_image.domain.request import make_request

    options = _options(ctx, flags.json_output)
    try:
        if flags.wait and (flags.dry_run or flags.no_submit):
            raise InvalidRequest("wait", "needs a submitted job: not with --dry-run or --no-submit")
        request = make_request(operation, name=name, role=role, source=source)
        lifecycles = _lifecycles(options)
        if flags.dry_run:
            planned = lifecycles.plan(operation, source, name=name, role=role)
            plan_data = planned.plan.model_dump(mode="json")
            human = (
                f"lifecycle {planned.plan.lifecycle_id} (dry run: nothing created)\n"
                f"plan:\n{planned.plan.canonical_bytes().decode()}"
                f"script:\n{planned.script}"
            )
            _emit(options, {"plan": plan_data, "script": planned.script}, human.rstrip("\n"))
            return
        if not flags.no_submit:
            from slurm_image.entrypoints.container import require_submitter

            require_submitter(lifecycles.container, lifecycles.profile)
        with _progress(options, enabled=flags.wait) as on_poll:
            outcome = lifecycles.run(
                request,
                submit=not flags.no_submit,
                wait=flags.wait,
                timeout_s=flags.timeout_s,
                replace=flags.replace,
                force=flags.force,
                on_poll=on_poll,
            )
    except CommandFailed:
        raise
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_outcome(options, outcome)


def _emit_outcome(options: Options, outcome: Outcome) -> None:
    if outcome.published is not None:
        record = outcome.published
        how = "answered from the store (no job)" if outcome.from_store else "published"
        human = f"{how}: {record.name}\n{_describe_record(record)}"
        _emit(options, outcome.as_dict(), human, record.path)
    elif outcome.job_id is None:
        _emit(
            options,
            {"lifecycle_id": outcome.lifecycle_id, "job_directory": outcome.job_directory},
            f"lifecycle {outcome.lifecycle_id} staged in {outcome.job_directory}\n"
            f"submit it with: {PROG} submit {outcome.lifecycle_id}",
            outcome.lifecycle_id,
        )
    else:
        _emit_submission(options, outcome.lifecycle_id, outcome.job_id)


def _emit_submission(options: Options, lifecycle_id: str, job_id: str) -> None:
    _emit(
        options,
        {"lifecycle_id": lifecycle_id, "job_id": job_id, "state": "SUBMITTED"},
        f"lifecycle {lifecycle_id} submitted as job {job_id}\n"
        f"wait for it and publish it with: {PROG} wait {lifecycle_id} && {PROG} publish"
        f" {lifecycle_id}",
        lifecycle_id,
    )


NameOption = Annotated[
    str, typer.Option("--name", metavar="NAME", help="Alias to publish under.", show_default=False)
]
RoleOption = Annotated[Role, typer.Option("--role", help="What the image is for.")]
DryRunOption = Annotated[bool, typer.Option("--dry-run", help="Print plan and script only.")]
NoSubmitOption = Annotated[
    bool, typer.Option("--no-submit", help="Stage only; submit later with `submit ID`.")
]
WaitOption = Annotated[
    bool, typer.Option("--wait", help="Wait for the job and publish its result.")
]
TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", metavar="S", min=0, help="Stop waiting after S seconds (exit 7)."),
]
ReplaceOption = Annotated[
    bool, typer.Option("--replace", help="Rebind an existing alias (its old artifact stays).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")]
IdArgument = Annotated[str, typer.Argument(metavar="ID", help="A lifecycle id.")]
IdsArgument = Annotated[list[str], typer.Argument(metavar="ID", help="Lifecycle ids.")]
AliasArgument = Annotated[str, typer.Argument(metavar="NAME", help="A published alias.")]


@app.command("import")
def import_command(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(metavar="SOURCE", help="registry/repo[:tag]@sha256:<64 hex>"),
    ],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    no_submit: NoSubmitOption = False,
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    replace: ReplaceOption = False,
    force: Annotated[
        bool, typer.Option("--force", help="Import even when the store holds this source.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Import a digest-pinned OCI image into a verified .sqsh and inspect it."""
    flags = LifecycleFlags(dry_run, no_submit, json_output, wait, timeout, replace, force)
    _lifecycle_command(ctx, "import_oci", source, name, role.value, flags)


@app.command("inspect")
def inspect_command(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="SQSH", help="Absolute path of an existing .sqsh")
    ],
    name: NameOption,
    role: RoleOption,
    dry_run: DryRunOption = False,
    no_submit: NoSubmitOption = False,
    wait: WaitOption = False,
    timeout: TimeoutOption = None,
    replace: ReplaceOption = False,
    json_output: JsonOption = False,
) -> None:
    """Inspect an existing .sqsh in place."""
    flags = LifecycleFlags(dry_run, no_submit, json_output, wait, timeout, replace)
    _lifecycle_command(ctx, "inspect_sqsh", source, name, role.value, flags)


@app.command("submit")
def submit_command(
    ctx: typer.Context, lifecycle_id: IdArgument, json_output: JsonOption = False
) -> None:
    """Verify and submit a lifecycle staged with --no-submit."""
    options = _options(ctx, json_output)
    try:
        paths.name(lifecycle_id, "lifecycle_id")
        submission = _lifecycles(options).submit(lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_submission(options, submission.lifecycle_id, submission.job_id)


# -- observe -----------------------------------------------------------------------------


@app.command("status")
def status_command(
    ctx: typer.Context, lifecycle_ids: IdsArgument, json_output: JsonOption = False
) -> None:
    """Lifecycle and scheduler state, with one scheduler call for all ids."""
    options = _options(ctx, json_output)
    try:
        statuses = _lifecycles(options).status(lifecycle_ids)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_statuses(options, statuses, {})


def _emit_statuses(
    options: Options, statuses: Sequence[LifecycleStatus], extra: dict[str, Any]
) -> None:
    _emit(
        options,
        {"lifecycles": [status.as_dict() for status in statuses], **extra},
        "\n".join(_describe_status(status) for status in statuses),
        "\n".join(f"{s.lifecycle_id} {s.state}" for s in statuses),
    )


@contextmanager
def _progress(options: Options, *, enabled: bool = True) -> Iterator[Progress | None]:
    """A live display (one line per lifecycle) on a terminal; nothing otherwise."""
    if not enabled or options.json or options.quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    with Live(console=Console(stderr=True), transient=True, refresh_per_second=4) as live:

        def show(statuses: Sequence[LifecycleStatus], elapsed_s: float) -> None:
            table = Table(box=None, header_style="bold")
            for column in ("LIFECYCLE", "JOB", "STATE", "ELAPSED"):
                table.add_column(column)
            for status in statuses:
                table.add_row(
                    status.lifecycle_id, status.job_id or "-", status.state, f"{elapsed_s:.0f}s"
                )
            live.update(table)

        yield show


@app.command("wait")
def wait_command(
    ctx: typer.Context,
    lifecycle_ids: IdsArgument,
    timeout: TimeoutOption = None,
    json_output: JsonOption = False,
) -> None:
    """Poll with backoff until every job is terminal (exit 4 if any failed, 7 on timeout)."""
    from slurm_image.application.wait import require_success

    options = _options(ctx, json_output)
    try:
        with _progress(options) as on_poll:
            result = _lifecycles(options).wait(lifecycle_ids, timeout_s=timeout, on_poll=on_poll)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_statuses(options, result.lifecycles, {"timed_out": result.timed_out})
    try:
        require_success(result)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error


@app.command("cancel")
def cancel_command(
    ctx: typer.Context, lifecycle_id: IdArgument, json_output: JsonOption = False
) -> None:
    """Cancel the lifecycle's job."""
    options = _options(ctx, json_output)
    try:
        status = _lifecycles(options).cancel(lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(
        options,
        {"lifecycle_id": status.lifecycle_id, "state": status.state},
        f"lifecycle {status.lifecycle_id}: cancel requested; job {status.job_id} is {status.state}",
        status.state,
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


# -- publish and the catalog -------------------------------------------------------------


def _describe_record(record: AliasRecord) -> str:
    facts = record.facts
    if "server" in facts:
        summary = f"{facts['server']['name']} {facts['server']['version']}"
    else:
        python = facts.get("python", {})
        count = len(facts.get("distributions", []))
        summary = (
            f"python {python.get('version')} ({python.get('implementation')}),"
            f" {count} distributions, pip {facts.get('installer', {}).get('version')}"
        )
    rows = [
        ("name", record.name),
        ("role", record.role),
        ("path", record.path),
        ("sqsh_sha256", record.sqsh_sha256),
        ("source", record.source),
        ("facts", summary),
        ("published_at", record.published_at),
        ("lifecycle_id", record.lifecycle_id),
    ]
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"  {key.ljust(width)}  {value}" for key, value in rows)


@app.command("publish")
def publish_command(
    ctx: typer.Context,
    lifecycle_id: IdArgument,
    replace: ReplaceOption = False,
    json_output: JsonOption = False,
) -> None:
    """Verify the finished job's result and publish it under its alias."""
    options = _options(ctx, json_output)
    try:
        paths.name(lifecycle_id, "lifecycle_id")
        record = _lifecycles(options).publish(lifecycle_id, replace=replace)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(
        options,
        record.details(),
        f"published {record.name}\n{_describe_record(record)}",
        record.path,
    )


@app.command("show")
def show_command(
    ctx: typer.Context,
    name: AliasArgument,
    verify: Annotated[
        bool, typer.Option("--verify", help="Re-hash the artifact against its digest.")
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """One alias: its verified .sqsh path and all its facts."""
    options = _options(ctx, json_output)
    try:
        record = _lifecycles(options).resolve(name, verify=verify)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    checked = " (artifact re-hashed: matches)" if verify else ""
    _emit(
        options,
        record.details() | ({"verified": True} if verify else {}),
        f"{record.name}{checked}\n{_describe_record(record)}",
        record.path,
    )


@app.command("list")
def list_command(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """The published aliases."""
    options = _options(ctx, json_output)
    try:
        records = _lifecycles(options).list_aliases()
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    rows = [
        (r.name, r.role, r.sqsh_sha256[:12], r.published_at[:19] + "Z", r.path) for r in records
    ]
    human = (
        _table(("NAME", "ROLE", "SHA256", "PUBLISHED", "PATH"), rows)
        if rows
        else "no images published yet"
    )
    _emit(
        options,
        {"images": [r.summary() for r in records]},
        human,
        "\n".join(r.name for r in records),
    )


@app.command("unregister")
def unregister_command(
    ctx: typer.Context, name: AliasArgument, json_output: JsonOption = False
) -> None:
    """Remove an alias; its artifact stays until gc finds nothing refers to it."""
    options = _options(ctx, json_output)
    try:
        removed = _lifecycles(options).unregister(name)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(options, {"name": removed}, f"unregistered {removed} (the artifact stays)")


@app.command("cleanup")
def cleanup_command(
    ctx: typer.Context, lifecycle_id: IdArgument, json_output: JsonOption = False
) -> None:
    """Remove an attempt directory (refused while its job may run)."""
    options = _options(ctx, json_output)
    try:
        removed = _lifecycles(options).cleanup(lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(options, {"lifecycle_id": removed}, f"removed the attempt {removed}")


@app.command("gc")
def gc_command(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="D", help="Finished attempts older than D (30m, 12h, 7d)."
        ),
    ] = "7d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List only; remove nothing.")] = False,
    json_output: JsonOption = False,
) -> None:
    """Remove unreferenced artifacts and finished attempts past the bound."""
    from slurm_image.domain.publication import parse_age

    options = _options(ctx, json_output)
    try:
        removed = _lifecycles(options).gc(older_than=parse_age(older_than), dry_run=dry_run)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    verb = "would remove" if dry_run else "removed"
    rows = [(item.kind, item.path) for item in removed]
    human = f"{verb}:\n{_table(('KIND', 'PATH'), rows)}" if rows else "nothing to remove"
    _emit(
        options,
        {"removed": [item.as_dict() for item in removed], "dry_run": dry_run},
        human,
        "\n".join(item.path for item in removed),
    )


def _next_step(error: BaseException) -> str | None:
    """What to do next, for the errors where the rule alone does not say it."""
    notes = getattr(error, "__notes__", None)
    if notes:
        return "; ".join(str(note) for note in notes)
    from slurm_image.application.errors import (
        JobNotSuccessful,
        UnknownLifecycle,
        VerificationFailed,
    )
    from slurm_image.domain.errors import InvalidProfile
    from slurm_image.ports.lock import LockTimeout
    from slurm_image.ports.submitter import SchedulerUnavailable

    if isinstance(error, InvalidProfile) and error.field == "profile":
        return "pass --profile PATH or set SLURM_IMAGE_PROFILE"
    if isinstance(error, JobNotSuccessful):
        return (
            f"`{PROG} status ID` explains the exit code;"
            " the job's log is slurm-<job id>.out in the attempt directory"
        )
    if isinstance(error, VerificationFailed):
        return "nothing was published; the attempt is kept as it is for inspection"
    if isinstance(error, UnknownLifecycle):
        return "use an id printed by import or inspect"
    if isinstance(error, LockTimeout):
        return "another publisher holds it; try again later"
    if isinstance(error, SchedulerUnavailable):
        return "check that the cluster is reachable and the [submitter] settings"
    return None


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one line on stderr and a documented exit code."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name=PROG, standalone_mode=False)
    except CommandFailed as failure:
        from slurm_image.entrypoints.errors import describe, exit_code_for

        hint = f" ({failure.hint})" if failure.hint else ""
        _fail(exit_code_for(failure.error), describe(failure.error) + hint)
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        _fail(130, "interrupted")
    except typer.BadParameter as error:
        field = error.param.name if error.param is not None and error.param.name else "argument"
        rule = " ".join(str(error.message).removeprefix("Value error, ").split())
        _fail(EXIT_INVALID, f"{field}: {rule} (see {PROG} --help)")
    except typer.TyperException as error:
        _fail(EXIT_INVALID, " ".join(error.format_message().split()))
    except Exception as error:
        from slurm_image.entrypoints.errors import describe

        _fail(EXIT_INTERNAL, f"internal error: {describe(error)} (please report this)")


if __name__ == "__main__":
    main()
