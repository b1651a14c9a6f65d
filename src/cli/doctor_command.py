"""``slurm-image doctor``: one line per check (``--json``: ``checks``, ``enroot_version``,
``architecture``, ``runs_architectures``).

Exit 0 only when every check passed; otherwise the code of the first failed check's kind
(docs/cli.md, "Exit codes"): 2 the profile or the workspace root, 3 the submitter or the partition,
4 the doctor's job or what it found on the compute node.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from slurm_image.cli.arguments import Options, Parser, seconds
from slurm_image.wire.exit_codes import (
    EXIT_INVALID,
    EXIT_JOB_FAILED,
    EXIT_OK,
    EXIT_SCHEDULER,
)

if TYPE_CHECKING:
    from argparse import Namespace

    from slurm_image.application.doctor import DoctorReport
    from slurm_image.domain.profile import ProfileSelection

# application.doctor.DEFAULT_TIMEOUT_S, written out so that building the command line (and its
# --help) loads nothing of the doctor; tests/cli/test_lazy_imports.py checks that they agree.
DEFAULT_TIMEOUT_S = 300.0


def exit_code(report: DoctorReport) -> int:
    from slurm_image.application.doctor import (
        ARCHITECTURE,
        ENROOT,
        INSPECTION_PATH,
        JOB,
        LAYER_CACHE,
        LOCAL_SCRATCH,
        PARTITION,
        POLICY,
        PROFILE,
        SANDBOX,
        SQUASHFS_TOOLS,
        SUBMITTER,
        WORKSPACE,
    )

    exit_for_check = {
        PROFILE: EXIT_INVALID,
        WORKSPACE: EXIT_INVALID,
        LAYER_CACHE: EXIT_INVALID,
        POLICY: EXIT_INVALID,
        SUBMITTER: EXIT_SCHEDULER,
        PARTITION: EXIT_SCHEDULER,
        JOB: EXIT_JOB_FAILED,
        ENROOT: EXIT_JOB_FAILED,
        SQUASHFS_TOOLS: EXIT_JOB_FAILED,
        LOCAL_SCRATCH: EXIT_JOB_FAILED,
        SANDBOX: EXIT_JOB_FAILED,
        INSPECTION_PATH: EXIT_JOB_FAILED,
        ARCHITECTURE: EXIT_JOB_FAILED,
    }
    failed = report.first_failure
    return EXIT_OK if failed is None else exit_for_check[failed.name]


def profile_detail(explicit: str | None, selection: ProfileSelection) -> str:
    """Which file, which cluster, and why each was chosen; the site policy when one applied."""
    from slurm_image.composition.profile_loader import PROFILE_ENV, profile_path

    path = profile_path(explicit, os.environ)
    if explicit:
        why_file = "--profile"
    elif os.environ.get(PROFILE_ENV):
        why_file = f"${PROFILE_ENV}"
    else:
        why_file = "the default in the working directory"
    if selection.cluster is None:
        cluster = "a single profile (no catalog)"
    elif selection.how == "hostname":
        cluster = f"cluster {selection.cluster} (this host matches {selection.pattern!r})"
    elif selection.how == "default":
        cluster = f"cluster {selection.cluster} (no host pattern matched: the catalog's default)"
    else:
        cluster = f"cluster {selection.cluster} (--cluster)"
    site = selection.site_policy_sha256
    return (
        f"{path.resolve()} (from {why_file}); {cluster};"
        f" profile sha256 {selection.profile_sha256[:12]}"
        + (f"; under the site policy (sha256 {site[:12]})" if site else "")
    )


def _diagnose(options: Options, timeout_s: float) -> DoctorReport:
    from slurm_image.adapters.statfs import StatfsFilesystems
    from slurm_image.application.doctor import Doctor, profile_failed
    from slurm_image.composition.container import build_container, require_submitter
    from slurm_image.composition.profile_loader import load_profile, profile_path
    from slurm_image.domain.errors import DomainError
    from slurm_image.wire.errors import describe

    try:
        profile, selection = load_profile(
            profile_path(options.profile, os.environ), cluster=options.cluster
        )
        container = build_container(profile)
        require_submitter(container, profile)
        submitter = container.submitter()
    except DomainError as error:
        return profile_failed(describe(error))
    doctor = Doctor(
        workspace=container.workspace(),
        submitter=submitter,
        filesystems=StatfsFilesystems(),
        clock=container.clock(),
        home=container.home(),
        signatures=container.signatures(),
    )
    return doctor(profile, profile_detail(options.profile, selection), timeout_s=timeout_s)


def add_options(parser: Parser) -> None:
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=seconds(1),
        default=DEFAULT_TIMEOUT_S,
        help=f"Seconds to wait for the doctor's tiny job (default {DEFAULT_TIMEOUT_S:g}).",
    )


def run(options: Options, args: Namespace) -> None:
    """Check the profile, the scheduler, the partition, the workspace and a compute node."""
    report = _diagnose(options, args.timeout)
    if options.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    elif not options.quiet or not report.ok:
        for check in report.checks:
            print(f"{'ok' if check.ok else 'FAIL':<4}  {check.name:<14}  {check.detail}")
    raise SystemExit(exit_code(report))
