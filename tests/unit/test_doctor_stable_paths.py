"""``doctor``'s ``stable_paths`` check (docs/cli.md, "doctor"): reported when the doctor is
given the catalog to read, after ``layer_cache``; it fails, naming the first stable path that is
missing or names another image and how the store's owner repairs them, and decides the exit
code (2) when it is the first failure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from slurm_image.adapters.memory import (
    FakeClock,
    FakeFilesystems,
    FakeSubmitter,
    MemoryFilesystem,
    MemoryWorkspace,
)
from slurm_image.application.catalog_reader import StablePathsChecked
from slurm_image.application.doctor import (
    CHECKS,
    LAYER_CACHE,
    PROFILE,
    STABLE_PATHS,
    Check,
    Doctor,
    DoctorReport,
)
from slurm_image.cli.doctor_command import exit_code
from slurm_image.domain.errors import InvalidPath
from slurm_image.domain.profile import parse_profile
from slurm_image.submitters import RetryPolicy
from slurm_image.wire.exit_codes import EXIT_INVALID
from support import profile_data

ROOT = "/site/ws"
LINK = f"{ROOT}/images/by-name/x86_64/app.sqsh"


def diagnose(checked: StablePathsChecked | Exception | None) -> DoctorReport:
    """The doctor over an unreachable scheduler (so no job runs), given ``checked`` as what the
    catalog's stable paths are found to be (None: given no catalog)."""
    data = profile_data()
    data["workspace_root"] = ROOT
    filesystem = MemoryFilesystem()
    filesystem.makedirs(ROOT, mode=0o755, uid=1000)
    clock = FakeClock()
    submitter = FakeSubmitter(partitions=set(), retry_policy=RetryPolicy.immediate())

    def found() -> StablePathsChecked:
        if isinstance(checked, Exception):
            raise checked
        assert checked is not None
        return checked

    doctor = Doctor(
        workspace=MemoryWorkspace(ROOT, filesystem, uid=1000),
        submitter=submitter,
        filesystems=FakeFilesystems("lustre"),
        clock=clock,
        sleep=lambda seconds: clock.advance(timedelta(seconds=seconds)),
        stable_paths=None if checked is None else found,
    )
    return doctor(parse_profile(data), "site.toml", timeout_s=5)


def check(report: DoctorReport) -> tuple[bool, str]:
    found = [c for c in report.checks if c.name == STABLE_PATHS]
    assert len(found) == 1, [c.name for c in report.checks]
    return found[0].ok, found[0].detail


def test_without_the_catalog_the_check_is_not_reported() -> None:
    names = [c.name for c in diagnose(None).checks]
    assert STABLE_PATHS not in names and STABLE_PATHS not in CHECKS


def test_every_stable_path_naming_its_image_passes_after_the_layer_cache() -> None:
    report = diagnose(StablePathsChecked(3, ()))
    names = [c.name for c in report.checks]
    assert names.index(STABLE_PATHS) == names.index(LAYER_CACHE) + 1
    assert check(report) == (True, "the stable paths of the 3 aliases you see name their images")
    assert check(diagnose(StablePathsChecked(0, ()))) == (
        True,
        "no alias is published for you to see yet",
    )


@pytest.mark.parametrize(
    ("wrong", "named"),
    [((LINK,), LINK), ((LINK, f"{LINK}2", f"{LINK}3"), f"{LINK} and 2 more")],
)
def test_a_stable_path_missing_or_naming_another_image_fails_naming_the_repair(
    wrong: tuple[str, ...], named: str
) -> None:
    ok, detail = check(diagnose(StablePathsChecked(5, wrong)))
    assert not ok
    assert detail.startswith(f"{named}: missing or naming another image")
    assert "slurm-image gc" in detail and "path --pinned" in detail


def test_a_catalog_that_cannot_be_read_fails_the_check() -> None:
    ok, detail = check(diagnose(InvalidPath(field=ROOT, rule="is not yours")))
    assert not ok and detail.startswith("the catalog cannot be read:")


def test_the_stable_paths_as_the_first_failure_exit_2() -> None:
    checks = (Check(PROFILE, True, "site.toml"), Check(STABLE_PATHS, False, f"{LINK}: missing"))
    assert exit_code(DoctorReport(checks)) == EXIT_INVALID
