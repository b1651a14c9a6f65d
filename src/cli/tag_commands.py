"""The commands that ask a registry from here (no job): ``resolve`` a tag to the pinned
reference ``import`` takes, and ``outdated``: does each published entry's tag still name its
image."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import PROG, Options
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.cli.output import emit, table
from slurm_image.cli.services import lifecycles
from slurm_image.domain import paths
from slurm_image.wire.exit_codes import EXIT_OUTDATED

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.outdated import OutdatedEntry

log = logging.getLogger("slurm_image")

RESOLVE_TIMEOUT_S = 60.0
"""``resolve --timeout`` and ``outdated --timeout`` default (``application.resolve``)."""


def resolve_command(options: Options, args: Namespace) -> None:
    """Resolve registry/repo:TAG to the pinned reference import takes, asking the registry from
    here (no job); --arch also names that architecture's manifest."""
    from slurm_image.domain.architecture import check_architecture

    try:
        arch = None if args.arch is None else check_architecture(args.arch)
        resolution = lifecycles(options).resolve_tag(
            args.reference, arch=arch, timeout_s=args.timeout or RESOLVE_TIMEOUT_S
        )
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    lines = [resolution.pinned]
    entries = resolution.manifest.entries
    if resolution.manifest.is_index:
        rows = [
            (entry.platform.describe() if entry.platform else "-", entry.digest)
            for entry in entries
        ]
        lines.append(f"an index of {len(entries)} manifests:")
        lines += ["  " + line for line in table(("PLATFORM", "DIGEST"), rows).splitlines()]
    if arch is not None:
        lines.append(f"{arch}: {resolution.arch_manifest}")
    emit(options, resolution.as_dict(), "\n".join(lines), resolution.pinned)


def outdated_command(options: Options, args: Namespace) -> None:
    """For every published alias (or those named) whose entries record a tag: does the tag
    still name that image? Exit 9 when one moved or is gone."""
    try:
        for name in args.names:
            paths.name(name)
        entries = lifecycles(options).outdated(
            args.names, timeout_s=args.timeout or RESOLVE_TIMEOUT_S
        )
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
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
        table(("NAME", "ARCH", "STATE", "TAG", "NOW"), rows) if rows else "no images published yet"
    )
    stale = [entry for entry in entries if entry.state in ("moved", "gone")]
    emit(
        options,
        {"images": [entry.as_dict() for entry in entries]},
        human,
        "\n".join(dict.fromkeys(entry.name for entry in stale)),
    )
    outdated_exit(entries, stale)


def outdated_exit(entries: Sequence[OutdatedEntry], stale: Sequence[OutdatedEntry]) -> None:
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
