"""Run by name: each alias's stable path names its current artifact through publish, replace and
unregister, ``gc`` keeps a replaced artifact for the grace and repairs links behind the catalog,
and the catalog reader answers ``path NAME``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from publish_support import SQSH_BYTES, PublishLab, store_for
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.application.name_links import NameLinks
from slurm_image.domain.access import Ownership
from slurm_image.domain.by_name import DEFAULT_RELEASE_GRACE, NameLayout
from slurm_image.domain.errors import InvalidIdentifier
from slurm_image.domain.publication import AliasDocument

A, B = "img-aaaaaaaaaaaa", "img-bbbbbbbbbbbb"
GROUP = "daemon"


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


def _maintain(lab: PublishLab, **options: Any) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5, **options)


def _link(lab: PublishLab, name: str = "app", group: str | None = None) -> str:
    return NameLayout(lab.layout).link(name, "x86_64", group)


def _names(lab: PublishLab, link: str) -> str:
    """The artifact the link at ``link`` resolves to, as a path in the store."""
    target = lab.harness.readlink(link)
    assert not target.startswith("/"), "a link is relative: the store resolves where mounted"
    directory = link.rsplit("/", 1)[0]
    parts = directory.split("/")
    for part in target.split("/"):
        if part == "..":
            parts.pop()
        else:
            parts.append(part)
    return "/".join(parts)


def test_publish_replace_and_unregister_swap_the_stable_path(lab: PublishLab) -> None:
    link = _link(lab)
    assert link == f"{lab.harness.root}/images/by-name/x86_64/app.sqsh"
    lab.finished(A)
    first = lab.publish(A).record
    assert _names(lab, link) == first.path
    lab.finished(B, sqsh=SQSH_BYTES + b" v2")
    second = lab.publish(B, replace=True).record
    assert second.path != first.path
    assert _names(lab, link) == second.path
    assert lab.harness.read(first.path) == SQSH_BYTES  # kept for the jobs that started with it
    _maintain(lab).unregister("app")
    assert not lab.harness.exists(link)
    assert lab.store.list_directory(f"{lab.harness.root}/images/by-name/x86_64") == []


def test_gc_keeps_a_replaced_artifact_for_the_grace_then_removes_it(lab: PublishLab) -> None:
    lab.finished(A)
    first = lab.publish(A).record
    lab.finished(B, sqsh=SQSH_BYTES + b" v2")
    lab.publish(B, replace=True)
    lab.clock.advance(DEFAULT_RELEASE_GRACE - timedelta(seconds=1))
    removed = _maintain(lab).gc(older_than=timedelta(days=7))
    assert [r.path for r in removed if r.kind == "artifact"] == []
    assert lab.harness.exists(first.path)
    lab.clock.advance(timedelta(seconds=1))
    removed = _maintain(lab).gc(older_than=timedelta(days=7))
    assert [r.path for r in removed if r.kind == "artifact"] == [first.path]
    released = NameLayout(lab.layout).released_record(first.sqsh_sha256)
    assert not lab.harness.exists(released)


def test_the_grace_is_a_setting(lab: PublishLab) -> None:
    lab.finished(A)
    first = lab.publish(A).record
    _maintain(lab).unregister("app")
    lab.clock.advance(timedelta(hours=1))
    kept = _maintain(lab, release_grace=timedelta(hours=2)).gc(older_than=timedelta(days=7))
    assert [r.path for r in kept if r.kind == "artifact"] == []
    gone = _maintain(lab, release_grace=timedelta(minutes=30)).gc(older_than=timedelta(days=7))
    assert [r.path for r in gone if r.kind == "artifact"] == [first.path]


def test_gc_repairs_links_that_disagree_with_the_catalog(lab: PublishLab) -> None:
    lab.finished(A)
    record = lab.publish(A).record
    link = _link(lab)
    lab.harness.remove(link)
    stray = _link(lab, "gone")
    lab.harness.symlink("../../artifacts/" + "0" * 64 + ".sqsh", stray)
    leftover = f"{link.rsplit('/', 1)[0]}/.app.sqsh.0123456789abcdef.tmp"
    lab.harness.symlink("../../artifacts/" + "1" * 64 + ".sqsh", leftover)
    _maintain(lab).gc(older_than=timedelta(days=7), dry_run=True)
    assert not lab.harness.exists(link)  # a dry run changes nothing
    _maintain(lab).gc(older_than=timedelta(days=7))
    assert _names(lab, link) == record.path
    assert not lab.harness.exists(stray)
    assert not lab.harness.exists(leftover)


def test_a_private_alias_has_its_link_in_a_directory_of_its_group(
    workspace_harness: Any, lab: PublishLab
) -> None:
    store = store_for(workspace_harness, frozenset({GROUP}))
    lab.finished(A)
    record = lab.publish(A).record
    document = AliasDocument.of(record, ownership=Ownership(group=GROUP, private=True))
    NameLinks(store).bind(None, document)
    link = _link(lab, group=GROUP)
    assert link == f"{lab.harness.root}/images/by-name/groups/{GROUP}/x86_64/app.sqsh"
    assert _names(lab, link) == record.path
    group_directory = f"{lab.harness.root}/images/by-name/groups/{GROUP}"
    assert workspace_harness.group_of(group_directory) == GROUP
    assert workspace_harness.mode(group_directory) == 0o750
    NameLinks(store).bind(document, None)
    assert not lab.harness.exists(link)


def test_the_catalog_reader_answers_the_stable_path_and_the_pinned_one(lab: PublishLab) -> None:
    lab.finished(A)
    record = lab.publish(A).record
    found = CatalogReader(lab.store).stable_path("app", arch="x86_64")
    assert (found.path, found.pinned, found.architecture) == (_link(lab), record.path, "x86_64")


def test_path_of_an_unknown_alias_or_a_bad_name_creates_nothing(lab: PublishLab) -> None:
    lab.finished(A)
    lab.publish(A)
    before = lab.store.list_directory(f"{lab.harness.root}/images")
    with pytest.raises(UnknownAlias):
        CatalogReader(lab.store).stable_path("missing")
    with pytest.raises(InvalidIdentifier):
        CatalogReader(lab.store).stable_path("../app")
    assert lab.store.list_directory(f"{lab.harness.root}/images") == before


def test_path_of_an_alias_published_before_stable_paths_says_gc_makes_it(
    lab: PublishLab,
) -> None:
    lab.finished(A)
    lab.publish(A)
    lab.harness.remove(_link(lab))
    with pytest.raises(VerificationFailed, match="gc"):
        CatalogReader(lab.store).stable_path("app", arch="x86_64")
    _maintain(lab).gc(older_than=timedelta(days=7))
    assert CatalogReader(lab.store).stable_path("app", arch="x86_64").path == _link(lab)


def test_gc_leaves_a_directory_in_a_links_place_and_still_repairs_the_others(
    lab: PublishLab,
) -> None:
    lab.finished(A)
    lab.publish(A)
    lab.finished(B, name="other", sqsh=SQSH_BYTES + b"2")
    other = lab.publish(B).record
    lab.harness.remove(_link(lab))
    lab.harness.mkdir(_link(lab))
    lab.harness.remove(_link(lab, "other"))
    _maintain(lab).gc(older_than=timedelta(days=7))
    assert lab.harness.kind_of(_link(lab)) == "directory"
    assert _names(lab, _link(lab, "other")) == other.path
