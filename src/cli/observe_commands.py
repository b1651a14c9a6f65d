"""The commands that watch a lifecycle's job: ``status`` (one scheduler call for all ids),
``wait``, ``logs`` and ``cancel``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from slurm_image.cli.arguments import Options
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.cli.output import emit, progress
from slurm_image.cli.services import lifecycles

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.status import LifecycleStatus


def status_command(options: Options, args: Namespace) -> None:
    """Lifecycle and scheduler state, with one scheduler call for all ids."""
    try:
        statuses = lifecycles(options).status(args.lifecycle_ids)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit_statuses(options, statuses, {})


def emit_statuses(
    options: Options, statuses: Sequence[LifecycleStatus], extra: dict[str, Any]
) -> None:
    emit(
        options,
        {"lifecycles": [status.as_dict() for status in statuses], **extra},
        "\n".join(describe_status(status) for status in statuses),
        "\n".join(f"{s.lifecycle_id} {s.state}" for s in statuses),
    )


def wait_command(options: Options, args: Namespace) -> None:
    """Poll with backoff until every job is terminal (exit 4 if any failed, 7 on timeout)."""
    from slurm_image.application.wait import require_success

    try:
        with progress(options) as on_poll:
            result = lifecycles(options).wait(
                args.lifecycle_ids, timeout_s=args.timeout, on_poll=on_poll
            )
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit_statuses(options, result.lifecycles, {"timed_out": result.timed_out})
    try:
        require_success(result)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error


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
        lifecycles(options).logs(args.lifecycle_id, write, follow=args.follow)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    end_piece()
    out.flush()
    if options.json:
        logs = [
            {"path": path, "text": b"".join(pieces).decode("utf-8", "replace")}
            for path, pieces in read.items()
        ]
        emit(options, {"lifecycle_id": args.lifecycle_id, "logs": logs}, "")


def cancel_command(options: Options, args: Namespace) -> None:
    """Cancel the lifecycle's job."""
    try:
        status = lifecycles(options).cancel(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit(
        options,
        {"lifecycle_id": status.lifecycle_id, "state": status.state},
        f"lifecycle {status.lifecycle_id}: cancel requested; job {status.job_id} is {status.state}",
        status.state,
    )


def describe_status(status: LifecycleStatus) -> str:
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
