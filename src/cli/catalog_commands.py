"""The commands of the store and the workspace: ``publish`` a finished attempt, ``show``,
``path`` and ``list`` the published aliases (through the catalog reader alone, unless
``show --verify``), ``catalog --html`` writes them as web pages, ``unregister`` an alias, remove
an attempt (``cleanup``) or what nothing refers to (``gc``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.cli.output import describe_record, emit, table
from slurm_image.cli.services import catalog_reader, lifecycles
from slurm_image.domain import paths

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.lifecycles_port import LifecyclesPort
    from slurm_image.domain.publication import AliasRecord


def publish_command(options: Options, args: Namespace) -> None:
    """Verify the finished job's result and publish it under its alias."""
    try:
        paths.name(args.lifecycle_id, "lifecycle_id")
        api = lifecycles(options)
        record = api.publish(args.lifecycle_id, replace=args.replace)
        details = published_details(api, record)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit(
        options,
        details,
        f"published {record.name}\n{describe_record(details)}",
        record.path,
    )


def published_details(api: LifecyclesPort, record: AliasRecord) -> dict[str, object]:
    """What ``publish`` and ``import --wait`` print of the alias ``record`` was published
    under: its details, who owns it, and its stable path."""
    shown = api.catalog_show(record.name, arch=record.architecture)
    details = record.details() | shown.owned.fields()
    details["stable_path"] = _stable_path(record.name, details)
    return details


def _stable_path(name: str, details: dict[str, object]) -> str | None:
    """The stable path of the entry ``details`` describes (``show``'s and ``publish``'s)."""
    from slurm_image.domain.by_name import stable_path_of

    group, architecture = details.get("group"), details.get("architecture")
    return stable_path_of(
        name,
        str(details["path"]),
        architecture if isinstance(architecture, str) else None,
        group if isinstance(group, str) and details.get("private") else None,
    )


def show_command(options: Options, args: Namespace) -> None:
    """One alias, for this machine's architecture unless --arch: its verified .sqsh path and
    all its facts."""
    from slurm_image.domain.architecture import check_architecture

    verify = args.verify
    try:
        arch = None if args.arch is None else check_architecture(args.arch)
        if verify:
            api = lifecycles(options)
            shown = api.catalog_show(args.name, arch=arch)
            details = (
                api.resolve(args.name, verify=True, arch=arch).details()
                | shown.owned.fields()
                | {"architectures": list(shown.architectures)}
            )
        else:
            published = catalog_reader(options).show(args.name, arch=arch)
            details = (
                published.details()
                | published.owned.fields()
                | {"architectures": list(published.architectures)}
            )
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    details["stable_path"] = _stable_path(args.name, details)
    checked = " (artifact re-hashed: matches)" if verify else ""
    emit(
        options,
        details | ({"verified": True} if verify else {}),
        f"{details['name']}{checked}\n{describe_record(details)}",
        str(details["path"]),
    )


def path_command(options: Options, args: Namespace) -> None:
    """The stable path of an alias's image for this machine's architecture unless --arch: it
    always names the alias's current artifact (--pinned: that artifact's own path)."""
    try:
        found = catalog_reader(options).stable_path(args.name, arch=args.arch)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    printed = found.pinned if args.pinned else found.path
    emit(options, found.as_dict(), printed, printed)


def list_command(options: Options, args: Namespace) -> None:
    """The published aliases."""
    from slurm_image.domain.listing import every_summary

    try:
        summaries = every_summary(catalog_reader(options).page)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
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
        table(("NAME", "ARCH", "ROLE", "SHA256", "PUBLISHED", "PATH"), rows)
        if rows
        else "no images published yet"
    )
    names = dict.fromkeys(row[0] for row in rows)
    emit(options, {"images": summaries}, human, "\n".join(names))


def catalog_command(options: Options, args: Namespace) -> None:
    """Write the catalog as web pages into DIR (index.html, one page per alias): what anyone
    may see of this machine's store, for a site's own web server."""
    from slurm_image.cli.services import gateway_url, services
    from slurm_image.domain.errors import InvalidRequest

    try:
        if gateway_url(options) is not None:
            raise InvalidRequest(
                field="gateway",
                rule="catalog --html reads this machine's store (--gateway local); the gateway"
                " serves the same pages itself",
            )
        exported = services().export_catalog(options, args.html)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    removed = f"; removed {len(exported.removed)} of aliases gone" if exported.removed else ""
    emit(
        options,
        {"directory": exported.directory, "pages": exported.pages, "removed": exported.removed},
        f"wrote {len(exported.pages)} pages into {exported.directory}{removed}",
        exported.directory,
    )


def unregister_command(options: Options, args: Namespace) -> None:
    """Remove an alias; its artifact stays until gc finds nothing refers to it."""
    try:
        removed = lifecycles(options).unregister(args.name)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit(options, {"name": removed}, f"unregistered {removed} (the artifact stays)")


def cleanup_command(options: Options, args: Namespace) -> None:
    """Remove an attempt directory (refused while its job may run)."""
    try:
        removed = lifecycles(options).cleanup(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit(options, {"lifecycle_id": removed}, f"removed the attempt {removed}")


def gc_command(options: Options, args: Namespace) -> None:
    """Remove unreferenced artifacts and finished attempts past the bound."""
    from slurm_image.domain.publication import parse_age

    dry_run = args.dry_run
    try:
        removed = lifecycles(options).gc(older_than=parse_age(args.older_than), dry_run=dry_run)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    verb = "would remove" if dry_run else "removed"
    rows = [(item.kind, item.path) for item in removed]
    human = f"{verb}:\n{table(('KIND', 'PATH'), rows)}" if rows else "nothing to remove"
    emit(
        options,
        {"removed": [item.as_dict() for item in removed], "dry_run": dry_run},
        human,
        "\n".join(item.path for item in removed),
    )
