"""Published means unchangeable by others (README, Threat model), on both stores: an inspected
``.sqsh`` that another user could change is refused before anything is staged, refused again
at publication, and a record that points at such a path is never resolved. And a marker path
that is not a regular file of ours (an image's ``WorkingDir`` can make it a directory) never
jams ``publish`` or ``gc``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab
from slurm_image.application.catalog import Catalog
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.domain.errors import InvalidPath
from support import require_root_for

A, B = (f"img-{n:032x}" for n in range(1, 3))
OTHER_UID = 4242


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _given_away(lab: PublishLab, what: str) -> str:
    """An inspectable .sqsh that another user could change in the way ``what`` says."""
    source = lab.outside("image.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.harness.chmod(source, 0o644)
    if what == "file owned by another user":
        lab.harness.chown(source, OTHER_UID)
        return source
    if what == "file writable by the group":
        lab.harness.chmod(source, 0o664)
        return source
    directory = source.rsplit("/", 1)[0]
    lab.harness.chown(directory, OTHER_UID)
    return directory


CHANGEABLE = [
    "file owned by another user",
    "file writable by the group",
    "directory owned by another user",
]


@pytest.mark.parametrize("what", CHANGEABLE)
def test_inspecting_a_sqsh_another_user_could_change_is_refused_before_staging(
    lab: PublishLab, what: str
) -> None:
    if "another user" in what:
        require_root_for(lab.harness)
    at_fault = _given_away(lab, what)
    before = lab.harness.listing()

    with pytest.raises(InvalidPath) as refused:
        lab.submitted(A, operation="inspect_sqsh", source=lab.outside("image.sqsh"))

    assert refused.value.field == "source"
    assert refused.value.rule.startswith(f"{at_fault} ")
    assert "only you or root can change" in refused.value.rule
    assert "copy it into a directory of your own" in refused.value.rule
    assert lab.harness.listing() == before  # nothing staged
    assert lab.scheduler.jobs == {}


def test_an_inspected_sqsh_given_away_after_staging_is_not_published(lab: PublishLab) -> None:
    require_root_for(lab.harness)
    source = lab.outside("image.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.finished(A, operation="inspect_sqsh", source=source)
    lab.harness.chown(source, OTHER_UID)

    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)

    assert refused.value.field == source
    assert f"is owned by uid {OTHER_UID}" in refused.value.reason
    assert not lab.harness.exists(lab.layout.alias("app"))


def test_a_published_path_another_user_can_now_change_is_never_resolved(
    lab: PublishLab,
) -> None:
    require_root_for(lab.harness)
    source = lab.outside("image.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.finished(A, operation="inspect_sqsh", source=source, name="theirs")
    lab.publish(A)
    lab.finished(B, name="mine")
    lab.publish(B)
    lab.harness.chown(source, OTHER_UID)  # as a record published before the rule was there
    lab.harness.write(source, SQSH_BYTES + b" rewritten")

    for show in (Catalog(lab.store).show, Catalog(lab.store).verify, CatalogReader(lab.store).show):
        with pytest.raises(VerificationFailed) as refused:
            show("theirs")
        assert refused.value.field == source
        assert f"is owned by uid {OTHER_UID}" in refused.value.reason
        assert "not vouched for" in refused.value.reason
    assert [record.name for record in Catalog(lab.store).list()] == ["mine"]
    assert [alias.record["name"] for alias in CatalogReader(lab.store).list()] == ["mine"]


# -- a marker path that is not a regular file of ours ----------------------------------------


def _maintain(lab: PublishLab) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5)


def _plant(lab: PublishLab, plant: str) -> str:
    marker = lab.layout.marker("app")
    lab.store.ensure_directory(lab.layout.markers, mode=0o700)
    if plant == "directory":  # as Enroot's `mkdir -p` of a WorkingDir leaves it
        lab.harness.mkdir(marker)
        lab.harness.mkdir(f"{marker}/deeper")
    elif plant == "symlink":
        outside = lab.outside("kept.json")
        lab.harness.write(outside, b"{}")
        lab.harness.symlink(outside, marker)
    else:
        lab.harness.mkfifo(marker)
    return marker


PLANTS = ["directory", "symlink", "fifo"]


@pytest.mark.parametrize("plant", PLANTS)
def test_publish_removes_a_marker_path_that_is_no_marker_and_publishes(
    lab: PublishLab, plant: str
) -> None:
    lab.finished(A)
    marker = _plant(lab, plant)

    record = lab.publish(A).record

    assert record.name == "app"
    assert not lab.harness.exists(marker)
    if plant == "symlink":
        assert lab.harness.read(lab.outside("kept.json")) == b"{}"  # never followed


@pytest.mark.parametrize("plant", PLANTS)
def test_gc_removes_a_marker_path_that_is_no_marker(lab: PublishLab, plant: str) -> None:
    marker = _plant(lab, plant)

    _maintain(lab).gc(older_than=timedelta(days=7))

    assert not lab.harness.exists(marker)


def test_a_marker_path_that_cannot_be_removed_is_refused_naming_it(lab: PublishLab) -> None:
    require_root_for(lab.harness)
    lab.finished(A)
    marker = _plant(lab, "directory")
    lab.harness.chown(marker, OTHER_UID)

    with pytest.raises(VerificationFailed) as refused:
        lab.publish(A)

    assert refused.value.field == marker
    assert "not a publication marker" in refused.value.reason
    assert "remove it by hand" in refused.value.reason
    assert not lab.harness.exists(lab.layout.alias("app"))


def test_a_published_path_that_is_gone_is_named_as_gone(lab: PublishLab) -> None:
    source = lab.outside("image.sqsh")
    lab.harness.write(source, SQSH_BYTES)
    lab.finished(A, operation="inspect_sqsh", source=source, name="gone")
    lab.publish(A)
    lab.harness.remove(source)

    with pytest.raises(VerificationFailed) as refused:
        CatalogReader(lab.store).show("gone")

    assert refused.value.field == source
    assert refused.value.reason.startswith("does not exist: the published image is gone")
