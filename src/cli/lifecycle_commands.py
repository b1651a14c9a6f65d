"""The commands that start a lifecycle: ``import``, ``inspect`` (each staged, submitted, with
``--wait`` waited for and published, or with ``--dry-run`` only planned) and ``submit`` of one
staged with ``--no-submit``."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import PROG, Options
from slurm_image.cli.catalog_commands import published_details
from slurm_image.cli.command_failure import CommandFailed, next_step
from slurm_image.cli.output import describe_record, emit, progress
from slurm_image.cli.services import gateway_url, lifecycles, own_credentials
from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.lifecycle_state import LifecycleState

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.lifecycle import Outcome
    from slurm_image.application.lifecycles_port import LifecyclesPort
    from slurm_image.domain.request import Operation

log = logging.getLogger("slurm_image")


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
    group: str | None = None


def lifecycle_command(
    options: Options,
    operation: Operation,
    source: str,
    name: str,
    role: str,
    flags: LifecycleFlags,
) -> None:
    """Validate the flags and the request, then hand the lifecycle over (``import_image`` or
    ``inspect_image`` of the API or of the gateway, which refuse a submitter that cannot work
    before the first file is created)."""
    from slurm_image.domain.request import check_fields, make_request

    try:
        if flags.wait and (flags.dry_run or flags.no_submit):
            raise InvalidRequest(
                field="wait", rule="needs a submitted job: not with --dry-run or --no-submit"
            )
        if flags.resolve:  # the tag is asked for only once everything else holds
            from slurm_image.domain.reference import parse_tag_reference

            check_fields(name=name, role=role, architecture=flags.arch)
            registry = parse_tag_reference(source).enroot_registry
        else:
            request = make_request(
                operation,
                name=name,
                role=role,
                source=source,
                architecture=flags.arch,
                unsigned_ok=flags.unsigned_ok,
                group=flags.group,
            )
            registry = None
            if request.operation == "import_oci":
                from slurm_image.domain.reference import parse_reference

                registry = parse_reference(source).enroot_registry
        credentials = None
        if flags.group is not None and registry is not None and gateway_url(options) is not None:
            credentials = own_credentials(options, registry)
        api = lifecycles(options)
        if flags.dry_run:
            planned = api.plan(
                operation,
                source,
                name=name,
                role=role,
                arch=flags.arch,
                resolve=flags.resolve,
                unsigned_ok=flags.unsigned_ok,
                group=flags.group,
                credentials=credentials,
            )
            plan_data = planned.plan.model_dump(mode="json")
            human = (
                f"lifecycle {planned.plan.lifecycle_id} (dry run: nothing created)\n"
                f"plan:\n{planned.plan.canonical_bytes().decode()}"
                f"script:\n{planned.script}"
            )
            emit(options, {"plan": plan_data, "script": planned.script}, human.rstrip("\n"))
            return
        with progress(options, enabled=flags.wait) as on_poll:
            if operation == "import_oci":
                outcome = api.import_image(
                    source,
                    name=name,
                    role=role,
                    submit=not flags.no_submit,
                    wait=flags.wait,
                    timeout_s=flags.timeout_s,
                    replace=flags.replace,
                    force=flags.force,
                    on_poll=on_poll,
                    arch=flags.arch,
                    resolve=flags.resolve,
                    group=flags.group,
                    credentials=credentials,
                )
            else:
                outcome = api.inspect_image(
                    source,
                    name=name,
                    role=role,
                    submit=not flags.no_submit,
                    wait=flags.wait,
                    timeout_s=flags.timeout_s,
                    replace=flags.replace,
                    on_poll=on_poll,
                    arch=flags.arch,
                    unsigned_ok=flags.unsigned_ok,
                    group=flags.group,
                )
    except CommandFailed:
        raise
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit_outcome(options, outcome, api)


def emit_outcome(options: Options, outcome: Outcome, api: LifecyclesPort) -> None:
    if outcome.published is not None:
        record = outcome.published
        how = "answered from the store (no job)" if outcome.from_store else "published"
        try:
            details = published_details(api, record)
        except Exception as error:
            raise CommandFailed(error, next_step(error)) from error
        human = f"{how}: {record.name}\n{describe_record(details)}"
        answer = outcome.as_dict() | {"stable_path": details["stable_path"]}
        emit(options, answer, human, record.path)
    elif outcome.job_id is None:
        emit(
            options,
            {"lifecycle_id": outcome.lifecycle_id, "job_directory": outcome.job_directory},
            f"lifecycle {outcome.lifecycle_id} staged in {outcome.job_directory}\n"
            f"submit it with: {PROG} submit {outcome.lifecycle_id}",
            outcome.lifecycle_id,
        )
    else:
        emit_submission(options, outcome.lifecycle_id, outcome.job_id)


def emit_submission(options: Options, lifecycle_id: str, job_id: str) -> None:
    emit(
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
        group=args.group,
    )
    lifecycle_command(options, "import_oci", args.source, args.name, args.role, flags)


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
        group=args.group,
    )
    lifecycle_command(options, "inspect_sqsh", args.source, args.name, args.role, flags)


def submit_command(options: Options, args: Namespace) -> None:
    """Verify and submit a lifecycle staged with --no-submit."""
    try:
        paths.name(args.lifecycle_id, "lifecycle_id")
        submission = lifecycles(options).submit(args.lifecycle_id)
    except Exception as error:
        raise CommandFailed(error, next_step(error)) from error
    emit_submission(options, submission.lifecycle_id, submission.job_id)
