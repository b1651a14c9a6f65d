"""``slurm-image doctor``: one line per check (``--json``: ``checks``, ``enroot_version``,
``architecture``, ``runs_architectures``).

Exit 0 only when every check passed; otherwise the code of the first failed check's kind
(docs/cli.md, "Exit codes"): 2 the profile, the workspace root or the store's stable paths, 3 the
submitter or the partition, 4 the doctor's job or what it found on the compute node.
"""

from __future__ import annotations

import json
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
        STABLE_PATHS,
        SUBMITTER,
        WORKSPACE,
    )

    exit_for_check = {
        PROFILE: EXIT_INVALID,
        WORKSPACE: EXIT_INVALID,
        LAYER_CACHE: EXIT_INVALID,
        POLICY: EXIT_INVALID,
        STABLE_PATHS: EXIT_INVALID,
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
    from slurm_image.cli.services import services

    report = services().diagnose(options, args.timeout)
    if options.json:
        print(json.dumps(report.as_dict(), sort_keys=True))
    elif not options.quiet or not report.ok:
        for check in report.checks:
            print(f"{'ok' if check.ok else 'FAIL':<4}  {check.name:<14}  {check.detail}")
    raise SystemExit(exit_code(report))
