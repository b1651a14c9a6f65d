"""What ``slurm-image doctor`` runs (``cli.doctor_command`` prints it): the selected profile
loaded and its container built as every command builds them, then the doctor's checks with the
real filesystems; a profile that fails is the first failed check."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from slurm_image.composition.container import build_container, require_submitter
from slurm_image.composition.profile_loader import PROFILE_ENV, load_profile, profile_path

if TYPE_CHECKING:
    from slurm_image.application.doctor import DoctorReport
    from slurm_image.cli.arguments import Options
    from slurm_image.domain.profile import ProfileSelection


def profile_detail(explicit: str | None, selection: ProfileSelection) -> str:
    """Which file, which cluster, and why each was chosen; the site policy when one applied."""
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


def diagnose(options: Options, timeout_s: float) -> DoctorReport:
    from slurm_image.adapters.statfs import StatfsFilesystems
    from slurm_image.application.doctor import Doctor, profile_failed
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
        stable_paths=lambda: container.catalog_reader().stable_paths_checked(),
    )
    return doctor(profile, profile_detail(options.profile, selection), timeout_s=timeout_s)
