"""The ``slurm-image`` command line (docs/cli.md). Parses (``entrypoints.arguments``), calls
``Lifecycles`` (the Python API, ``entrypoints.api``), prints. At module level only the standard
library and the domain's stdlib-only modules are imported: everything else (pydantic models, the
container, the use cases, the adapters, rich) is imported inside the commands that need it, so
``--help`` loads none of it (tests/cli/test_lazy_imports.py)."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.lifecycle_state import LifecycleState
from slurm_image.domain.roles import ROLES
from slurm_image.entrypoints import arguments, doctor_command
from slurm_image.entrypoints.arguments import PROG, Options
from slurm_image.entrypoints.exit_codes import EXIT_INTERNAL, EXIT_OUTDATED

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.catalog_reader import CatalogReader
    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.outdated import OutdatedEntry
    from slurm_image.application.status import LifecycleStatus
    from slurm_image.application.wait import Progress
    from slurm_image.domain.request import Operation
    from slurm_image.entrypoints.api import Lifecycles

log = logging.getLogger("slurm_image")


class CommandFailed(Exception):
    """An error already mapped to an exit code, with an optional hint on what to do next."""

    def __init__(self, error: BaseException, hint: str | None = None) -> None:
        from slurm_image.entrypoints.errors import describe

        self.error = error
        self.hint = hint
        super().__init__(describe(error))


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


def _emit(options: Options, payload: dict[str, Any], human: str, quiet: str | None = None) -> None:
    """``--json``: the payload; ``--quiet``: only ``quiet`` (ids, paths); else ``human``."""
    if options.json:
        print(json.dumps(payload, sort_keys=True))
    elif options.quiet:
        if quiet:
            print(quiet)
    else:
        print(human)


def _catalog_reader(options: Options) -> CatalogReader:
    from slurm_image.entrypoints.lookup import catalog_reader

    return catalog_reader(options.profile, cluster=options.cluster)


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
    wait: bool = False
    timeout_s: float | None = None
    replace: bool = False
    force: bool = False
    arch: str | None = None
    resolve: bool = False
    unsigned_ok: bool = False


RESOLVE_TIMEOUT_S = 60.0
"""``resolve --timeout`` and ``outdated --timeout`` default (``application.resolve``)."""


def _lifecycle_command(
    options: Options,
    operation: Operation,
    source: str,
    name: str,
    role: str,
    flags: LifecycleFlags,
) -> None:
    """Validate the flags and the request, then hand the lifecycle over (``Lifecycles.run``,
    which refuses a submitter that cannot work before the first file is created)."""
    from slurm_image.domain.request import make_request

    try:
        if flags.wait and (flags.dry_run or flags.no_submit):
            raise InvalidRequest(
                field="wait", rule="needs a submitted job: not with --dry-run or --no-submit"
            )
        if flags.resolve:  # the tag is asked for only once everything else holds
            from slurm_image.domain.reference import parse_tag_reference
            from slurm_image.domain.request import check_fields

            check_fields(name=name, role=role, architecture=flags.arch)
            parse_tag_reference(source)
        else:
            request = make_request(
                operation,
                name=name,
                role=role,
                source=source,
                architecture=flags.arch,
                unsigned_ok=flags.unsigned_ok,
            )
        lifecycles = _lifecycles(options)
        if flags.dry_run:
            planned = lifecycles.plan(
                operation,
                source,
                name=name,
                role=role,
                arch=flags.arch,
                resolve=flags.resolve,
                unsigned_ok=flags.unsigned_ok,
            )
            plan_data = planned.plan.model_dump(mode="json")
            human = (
                f"lifecycle {planned.plan.lifecycle_id} (dry run: nothing created)\n"
                f"plan:\n{planned.plan.canonical_bytes().decode()}"
                f"script:\n{planned.script}"
            )
            _emit(options, {"plan": plan_data, "script": planned.script}, human.rstrip("\n"))
            return
        if flags.resolve:
            request = lifecycles.request(
                operation, source, name=name, role=role, arch=flags.arch, resolve=True
            )
            log.info("%s resolved to %s", source, request.source)
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
        human = f"{how}: {record.name}\n{_describe_record(record.details())}"
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
        {"lifecycle_id": lifecycle_id, "job_id": job_id, "state": LifecycleState.SUBMITTED},
        f"lifecycle {lifecycle_id} submitted as job {job_id}\n"
        f"wait for it and publish it with: {PROG} wait {lifecycle_id} && {PROG} publish"
        f" {lifecycle_id}",
        lifecycle_id,
    )


def import_command(options: Options, args: Namespace) -> None:
    """Import a digest-pinned OCI image (or, with --resolve, a tag pinned first) into a
    verified .sqsh and inspect it."""
    flags = LifecycleFlags(
        args.dry_run,
        args.no_submit,
        args.wait,
        args.timeout,
        args.replace,
        args.force,
        args.arch,
        args.resolve,
    )
    _lifecycle_command(options, "import_oci", args.source, args.name, args.role, flags)


def inspect_command(options: Options, args: Namespace) -> None:
    """Inspect an existing .sqsh in place."""
    flags = LifecycleFlags(
        args.dry_run,
        args.no_submit,
        args.wait,
        args.timeout,
        args.replace,
        arch=args.arch,
        unsigned_ok=args.unsigned_ok,
    )
    _lifecycle_command(options, "inspect_sqsh", args.source, args.name, args.role, flags)


def submit_command(options: Options, args: Namespace) -> None:
    """Verify and submit a lifecycle staged with --no-submit."""
    try:
        paths.name(args.lifecycle_id, "lifecycle_id")
        submission = _lifecycles(options).submit(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_submission(options, submission.lifecycle_id, submission.job_id)


# -- observe -----------------------------------------------------------------------------


def status_command(options: Options, args: Namespace) -> None:
    """Lifecycle and scheduler state, with one scheduler call for all ids."""
    try:
        statuses = _lifecycles(options).status(args.lifecycle_ids)
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
            for column in ("LIFECYCLE", "JOB", "STATE", "PROGRESS", "ELAPSED"):
                table.add_column(column)
            for status in statuses:
                table.add_row(
                    status.lifecycle_id,
                    status.job_id or "-",
                    status.state,
                    status.progress.describe() if status.progress else "-",
                    _elapsed(elapsed_s),
                )
            live.update(table)

        yield show


def _elapsed(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


def wait_command(options: Options, args: Namespace) -> None:
    """Poll with backoff until every job is terminal (exit 4 if any failed, 7 on timeout)."""
    from slurm_image.application.wait import require_success

    try:
        with _progress(options) as on_poll:
            result = _lifecycles(options).wait(
                args.lifecycle_ids, timeout_s=args.timeout, on_poll=on_poll
            )
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit_statuses(options, result.lifecycles, {"timed_out": result.timed_out})
    try:
        require_success(result)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error


def logs_command(options: Options, args: Namespace) -> None:
    """Print the job's output and error logs (--follow: until the job has ended), their control
    characters escaped whoever wrote them; --json: one object with the text as it is."""
    from slurm_image.domain.log_text import LogDecoder

    out = sys.stdout
    current: list[str] = []
    decoders: dict[str, LogDecoder] = {}
    read: dict[str, list[bytes]] = {}

    def end_piece() -> None:
        if current:
            out.write(decoders[current[0]].text(b"", final=True))

    def write(path: str, data: bytes) -> None:
        if options.json:
            read.setdefault(path, []).append(data)
            return
        if current != [path]:
            end_piece()
            out.write(f"{chr(10) if current else ''}==> {path} <==\n")
            current[:] = [path]
        out.write(decoders.setdefault(path, LogDecoder()).text(data))
        out.flush()

    try:
        _lifecycles(options).logs(args.lifecycle_id, write, follow=args.follow)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    end_piece()
    out.flush()
    if options.json:
        logs = [
            {"path": path, "text": b"".join(pieces).decode("utf-8", "replace")}
            for path, pieces in read.items()
        ]
        _emit(options, {"lifecycle_id": args.lifecycle_id, "logs": logs}, "")


def cancel_command(options: Options, args: Namespace) -> None:
    """Cancel the lifecycle's job."""
    try:
        status = _lifecycles(options).cancel(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(
        options,
        {"lifecycle_id": status.lifecycle_id, "state": status.state},
        f"lifecycle {status.lifecycle_id}: cancel requested; job {status.job_id} is {status.state}",
        status.state,
    )


def _describe_status(status: LifecycleStatus) -> str:
    words = [status.lifecycle_id, status.state]
    if status.job_id:
        words.insert(1, f"job {status.job_id}")
    if status.exit_code is not None:
        words.append(f"exit {status.exit_code}")
    if status.progress is not None:
        words.append(f"phase {status.progress.describe()}")
    elif status.progress_error is not None:
        words.append(f"progress unreadable ({status.progress_error})")
    line = "  ".join(words)
    return f"{line}  ({status.reason})" if status.reason else line


# -- publish and the catalog -------------------------------------------------------------


def _describe_record(details: Mapping[str, Any]) -> str:
    """A published record's ``details()`` as aligned lines, its facts summed up."""
    facts = details["facts"]
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
        (key, summary if key == "facts" else details[key])
        for key in (
            "name",
            "role",
            "path",
            "sqsh_sha256",
            "source",
            "facts",
            "published_at",
            "lifecycle_id",
        )
    ]
    resolved_from = details.get("resolved_from")
    if isinstance(resolved_from, Mapping):
        tag = f"{resolved_from.get('tag')} (resolved {resolved_from.get('resolved_at')})"
        rows.insert(5, ("tag", tag))
    signed_by = details.get("signed_by")
    if isinstance(signed_by, Mapping):
        signer = f"{signed_by.get('key_fingerprint')} ({signed_by.get('format')})"
        rows.insert(rows.index(("source", details["source"])) + 1, ("signed by", signer))
    width = max(len(key) for key, _ in rows)
    return "\n".join(f"  {key.ljust(width)}  {value}" for key, value in rows)


def publish_command(options: Options, args: Namespace) -> None:
    """Verify the finished job's result and publish it under its alias."""
    try:
        paths.name(args.lifecycle_id, "lifecycle_id")
        record = _lifecycles(options).publish(args.lifecycle_id, replace=args.replace)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(
        options,
        record.details(),
        f"published {record.name}\n{_describe_record(record.details())}",
        record.path,
    )


def show_command(options: Options, args: Namespace) -> None:
    """One alias, for this machine's architecture unless --arch: its verified .sqsh path and
    all its facts."""
    from slurm_image.domain.architecture import check_architecture

    verify = args.verify
    try:
        arch = None if args.arch is None else check_architecture(args.arch)
        if verify:
            lifecycles = _lifecycles(options)
            details = lifecycles.resolve(args.name, verify=True, arch=arch).details() | {
                "architectures": list(lifecycles.architectures(args.name))
            }
        else:
            published = _catalog_reader(options).show(args.name, arch=arch)
            details = published.details() | {"architectures": list(published.architectures)}
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    checked = " (artifact re-hashed: matches)" if verify else ""
    _emit(
        options,
        details | ({"verified": True} if verify else {}),
        f"{details['name']}{checked}\n{_describe_record(details)}",
        str(details["path"]),
    )


def list_command(options: Options, args: Namespace) -> None:
    """The published aliases."""
    try:
        summaries = [record.summary() for record in _catalog_reader(options).list()]
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    rows = [
        (
            str(s["name"]),
            str(s["architecture"] or "unknown"),
            str(s["role"]),
            str(s["sqsh_sha256"])[:12],
            str(s["published_at"])[:19] + "Z",
            str(s["path"]),
        )
        for s in summaries
    ]
    human = (
        _table(("NAME", "ARCH", "ROLE", "SHA256", "PUBLISHED", "PATH"), rows)
        if rows
        else "no images published yet"
    )
    names = dict.fromkeys(row[0] for row in rows)
    _emit(options, {"images": summaries}, human, "\n".join(names))


def unregister_command(options: Options, args: Namespace) -> None:
    """Remove an alias; its artifact stays until gc finds nothing refers to it."""
    try:
        removed = _lifecycles(options).unregister(args.name)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(options, {"name": removed}, f"unregistered {removed} (the artifact stays)")


def cleanup_command(options: Options, args: Namespace) -> None:
    """Remove an attempt directory (refused while its job may run)."""
    try:
        removed = _lifecycles(options).cleanup(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    _emit(options, {"lifecycle_id": removed}, f"removed the attempt {removed}")


def gc_command(options: Options, args: Namespace) -> None:
    """Remove unreferenced artifacts and finished attempts past the bound."""
    from slurm_image.domain.publication import parse_age

    dry_run = args.dry_run
    try:
        removed = _lifecycles(options).gc(older_than=parse_age(args.older_than), dry_run=dry_run)
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


# -- tags --------------------------------------------------------------------------------


def resolve_command(options: Options, args: Namespace) -> None:
    """Resolve registry/repo:TAG to the pinned reference import takes, asking the registry from
    here (no job); --arch also names that architecture's manifest."""
    from slurm_image.domain.architecture import check_architecture

    try:
        arch = None if args.arch is None else check_architecture(args.arch)
        resolution = _lifecycles(options).resolve_tag(
            args.reference, arch=arch, timeout_s=args.timeout or RESOLVE_TIMEOUT_S
        )
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    lines = [resolution.pinned]
    entries = resolution.manifest.entries
    if resolution.manifest.is_index:
        rows = [
            (entry.platform.describe() if entry.platform else "-", entry.digest)
            for entry in entries
        ]
        lines.append(f"an index of {len(entries)} manifests:")
        lines += ["  " + line for line in _table(("PLATFORM", "DIGEST"), rows).splitlines()]
    if arch is not None:
        lines.append(f"{arch}: {resolution.arch_manifest}")
    _emit(options, resolution.as_dict(), "\n".join(lines), resolution.pinned)


def outdated_command(options: Options, args: Namespace) -> None:
    """For every published alias (or those named) whose entries record a tag: does the tag
    still name that image? Exit 9 when one moved or is gone."""
    try:
        for name in args.names:
            paths.name(name)
        entries = _lifecycles(options).outdated(
            args.names, timeout_s=args.timeout or RESOLVE_TIMEOUT_S
        )
    except Exception as error:
        raise CommandFailed(error, _next_step(error)) from error
    rows = [
        (
            entry.name,
            entry.architecture or "unknown",
            str(entry.state),
            entry.tag or "-",
            entry.new_pin or entry.reason or "",
        )
        for entry in entries
    ]
    human = (
        _table(("NAME", "ARCH", "STATE", "TAG", "NOW"), rows) if rows else "no images published yet"
    )
    stale = [entry for entry in entries if entry.state in ("moved", "gone")]
    _emit(
        options,
        {"images": [entry.as_dict() for entry in entries]},
        human,
        "\n".join(dict.fromkeys(entry.name for entry in stale)),
    )
    _outdated_exit(entries, stale)


def _outdated_exit(entries: Sequence[OutdatedEntry], stale: Sequence[OutdatedEntry]) -> None:
    """0 when every tag still names its image; the first failure's code when a tag could not be
    resolved (the answer is incomplete); else 9 when one moved or is gone."""
    failed = [entry for entry in entries if entry.error is not None]
    if failed:
        first = failed[0]
        assert first.error is not None
        raise CommandFailed(
            first.error,
            f"{len(failed)} of {len(entries)} entries could not be checked, {first.name}"
            f" ({first.architecture}) first",
        )
    if stale:
        for entry in stale:
            if entry.state == "moved":
                arch = f" --arch {entry.architecture}" if entry.architecture else ""
                log.warning(
                    "%s%s moved: %s import %s --name %s --role %s%s --replace --wait",
                    entry.name,
                    f" ({entry.architecture})" if entry.architecture else "",
                    PROG,
                    entry.new_pin,
                    entry.name,
                    entry.role,
                    arch,
                )
        raise SystemExit(EXIT_OUTDATED)


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
        return f"`{PROG} status ID` explains the exit code; `{PROG} logs ID` prints the job's logs"
    if isinstance(error, VerificationFailed):
        return "nothing was published; the attempt is kept as it is for inspection"
    if isinstance(error, UnknownLifecycle):
        return "use an id printed by import or inspect"
    if isinstance(error, LockTimeout):
        return "another publisher holds it; try again later"
    if isinstance(error, SchedulerUnavailable):
        return "check that the cluster is reachable and the [submitter] settings"
    return None


Command = Callable[[Options, "Namespace"], None]


def _command(commands: Any, name: str, run: Command, help_text: str) -> arguments.Parser:
    parser: arguments.Parser = commands.add_parser(name, help=help_text, description=help_text)
    parser.set_defaults(run=run)
    return parser


def _lifecycle_options(parser: arguments.Parser) -> None:
    parser.add_argument("--name", metavar="NAME", required=True, help="Alias to publish under.")
    parser.add_argument("--role", choices=ROLES, required=True, help="What the image is for.")
    parser.add_argument("--dry-run", action="store_true", help="Print plan and script only.")
    parser.add_argument(
        "--no-submit", action="store_true", help="Stage only; submit later with `submit ID`."
    )
    _arch(
        parser,
        "Architecture x86_64, aarch64 or ppc64le: import builds for it (default: the"
        " profile's, else the node's); inspect requires the image to be it.",
    )
    parser.add_argument(
        "--wait", action="store_true", help="Wait for the job and publish its result."
    )
    _timeout(parser)
    parser.add_argument(
        "--replace", action="store_true", help="Rebind an existing alias (its old artifact stays)."
    )


def _timeout(parser: arguments.Parser) -> None:
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=arguments.seconds(0),
        help="Stop waiting after S seconds (exit 7).",
    )


def _registry_timeout(parser: arguments.Parser) -> None:
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=arguments.seconds(1),
        help=f"Give up on a registry after S seconds, retries included (default"
        f" {RESOLVE_TIMEOUT_S:g}).",
    )


def _id(parser: arguments.Parser) -> None:
    parser.add_argument("lifecycle_id", metavar="ID", help="A lifecycle id.")


def _arch(parser: arguments.Parser, help_text: str) -> None:
    parser.add_argument("--arch", metavar="A", help=help_text)


def _alias(parser: arguments.Parser) -> None:
    parser.add_argument("name", metavar="NAME", help="A published alias.")


def parser() -> arguments.Parser:
    """The whole command line (docs/cli.md)."""
    root, commands = arguments.root_parser(
        "Turn digest-pinned container images into verified Enroot squashfs files on Slurm."
    )
    imports = _command(commands, "import", import_command, _doc(import_command))
    imports.add_argument(
        "source",
        metavar="SOURCE",
        help="registry/repo[:tag]@sha256:<64 hex> (with --resolve: registry/repo:tag)",
    )
    _lifecycle_options(imports)
    imports.add_argument(
        "--force", action="store_true", help="Import even when the store holds this source."
    )
    imports.add_argument(
        "--resolve",
        action="store_true",
        help="SOURCE is registry/repo:TAG: pin it to the digest the registry answers now, and"
        " record the tag.",
    )
    inspects = _command(commands, "inspect", inspect_command, _doc(inspect_command))
    inspects.add_argument("source", metavar="SQSH", help="Absolute path of an existing .sqsh")
    _lifecycle_options(inspects)
    inspects.add_argument(
        "--unsigned-ok",
        action="store_true",
        help="Inspect even where the profile's [policy] requires a signature: a local .sqsh"
        " carries none (the plan records that this was asked).",
    )
    _id(_command(commands, "submit", submit_command, _doc(submit_command)))
    for name, run in (("status", status_command), ("wait", wait_command)):
        watched = _command(commands, name, run, _doc(run))
        watched.add_argument("lifecycle_ids", metavar="ID", nargs="+", help="Lifecycle ids.")
    _timeout(commands.choices["wait"])
    _id(_command(commands, "cancel", cancel_command, _doc(cancel_command)))
    logs = _command(commands, "logs", logs_command, _doc(logs_command))
    _id(logs)
    logs.add_argument("--follow", action="store_true", help="Keep printing until the job ends.")
    doctor = _command(commands, "doctor", doctor_command.run, _doc(doctor_command.run))
    doctor_command.add_options(doctor)
    publishing = _command(commands, "publish", publish_command, _doc(publish_command))
    _id(publishing)
    publishing.add_argument(
        "--replace", action="store_true", help="Rebind an existing alias (its old artifact stays)."
    )
    shown = _command(commands, "show", show_command, _doc(show_command))
    _alias(shown)
    shown.add_argument(
        "--verify", action="store_true", help="Re-hash the artifact against its digest."
    )
    _arch(shown, "The alias's image for A (default: this machine's architecture).")
    _command(commands, "list", list_command, _doc(list_command))
    resolving = _command(commands, "resolve", resolve_command, _doc(resolve_command))
    resolving.add_argument("reference", metavar="REFERENCE", help="registry/repo:tag")
    _arch(resolving, "Also name the manifest an import for A gets (x86_64, aarch64, ppc64le).")
    _registry_timeout(resolving)
    checking = _command(commands, "outdated", outdated_command, _doc(outdated_command))
    checking.add_argument("names", metavar="NAME", nargs="*", help="Aliases (default: all).")
    _registry_timeout(checking)
    _alias(_command(commands, "unregister", unregister_command, _doc(unregister_command)))
    _id(_command(commands, "cleanup", cleanup_command, _doc(cleanup_command)))
    collect = _command(commands, "gc", gc_command, _doc(gc_command))
    collect.add_argument(
        "--older-than",
        metavar="D",
        default="7d",
        help="Finished attempts older than D (30m, 12h, 7d; default 7d).",
    )
    collect.add_argument("--dry-run", action="store_true", help="List only; remove nothing.")
    for command in commands.choices.values():
        arguments.add_json(command)
    return root


def _doc(run: Command) -> str:
    return (run.__doc__ or "").strip()


def _fail(code: int, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: every failure is one line on stderr and a documented exit code."""
    root = parser()
    namespace = root.parse_args(argv)
    options = arguments.options_of(namespace)
    _configure_logging(options.verbose)
    run: Command | None = getattr(namespace, "run", None)
    if run is None:
        root.print_help()
        raise SystemExit(0)
    try:
        run(options, namespace)
    except CommandFailed as failure:
        from slurm_image.entrypoints.errors import describe, exit_code_for

        hint = f" ({failure.hint})" if failure.hint else ""
        _fail(exit_code_for(failure.error), describe(failure.error) + hint)
    except KeyboardInterrupt:
        _fail(130, "interrupted")
    except Exception as error:
        from slurm_image.entrypoints.errors import describe

        _fail(EXIT_INTERNAL, f"internal error: {describe(error)} (please report this)")


if __name__ == "__main__":
    main()
