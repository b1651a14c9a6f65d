"""The catalog's index (``application.catalog_index``): what a long-running reader keeps of the
alias files between calls, over both stores; every change a writer makes, in this process or
another, is seen at the next read, and a change a killed writer left unfinished keeps nothing."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from publish_support import SOURCE, SQSH_BYTES, PublishLab
from slurm_image.adapters.local_store import LocalStore
from slurm_image.application.catalog_index import CatalogIndex
from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import UnknownAlias, VerificationFailed
from slurm_image.application.maintain import Maintain
from slurm_image.domain.listing import ListQuery
from support import PACKAGE_DIR

A, B, C = (f"img-{n:032x}" for n in range(1, 4))
NEW_SQSH = SQSH_BYTES + b" rebuilt"


@pytest.fixture
def lab(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> PublishLab:
    return PublishLab(workspace_harness, profile_for, runtime_files)


class CountingStore:
    """The lab's store, counting the records read whole (``read_stable``) by path."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.reads: Counter[str] = Counter()

    def read_stable(self, path: str, *, max_bytes: int) -> Any:
        self.reads[path] += 1
        return self._store.read_stable(path, max_bytes=max_bytes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _indexed(store: Any) -> CatalogReader:
    return CatalogReader(store, index=CatalogIndex(store))


def _maintain(lab: PublishLab) -> Maintain:
    return Maintain(lab.store, lab.locks, lab.observe, lab.clock, lock_timeout_s=5)


def test_an_alias_file_is_read_once_while_no_alias_changes(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    store = CountingStore(lab.store)
    reader = _indexed(store)
    for _ in range(3):
        assert reader.show("one").record["name"] == "one"
        assert [entry.record["name"] for entry in reader.list()] == ["one"]
    assert store.reads[lab.layout.alias("one")] == 1


def test_a_publication_a_replacement_and_an_unregistration_are_seen_at_the_next_read(
    lab: PublishLab,
) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    reader = _indexed(lab.store)
    assert reader.names() == ["one"]
    assert reader.show("one").record["sqsh_sha256"] == hashlib.sha256(SQSH_BYTES).hexdigest()

    lab.finished(B, name="two")
    lab.publish(B)
    assert sorted(reader.names()) == ["one", "two"]
    assert [image["name"] for image in reader.page(ListQuery()).images] == ["one", "two"]

    lab.finished(C, name="one", sqsh=NEW_SQSH)
    lab.publish(C, replace=True)
    assert reader.show("one").record["sqsh_sha256"] == hashlib.sha256(NEW_SQSH).hexdigest()

    _maintain(lab).unregister("two")
    with pytest.raises(UnknownAlias):
        reader.show("two")
    assert reader.names() == ["one"]


def test_a_change_a_killed_writer_left_keeps_nothing_until_gc_counts_it(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    store = CountingStore(lab.store)
    reader = _indexed(store)
    alias = lab.layout.alias("one")
    reader.show("one")
    lab.store.bump(lab.layout.aliases_begun)  # a writer killed after it began its change
    reader.show("one")
    reader.show("one")
    assert store.reads[alias] == 3
    _maintain(lab).gc(older_than=timedelta(days=7))
    reader.show("one")
    reader.show("one")
    assert store.reads[alias] == 4


def test_a_name_that_is_not_published_is_looked_for_again(lab: PublishLab) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    reader = _indexed(lab.store)
    with pytest.raises(UnknownAlias):
        reader.show("later")
    lab.harness.write(lab.layout.alias("later"), lab.harness.read(lab.layout.alias("one")))
    with pytest.raises(VerificationFailed):  # read again: its record names another alias
        reader.show("later")
    assert reader.show("one").record["name"] == "one"


OTHER_PROCESS = textwrap.dedent(
    """
    import sys
    from slurm_image.composition.api import Lifecycles

    lifecycles = Lifecycles.from_profile(sys.argv[1], environ={})
    verb, name = sys.argv[2:4]
    if verb == "import":
        outcome = lifecycles.import_image(sys.argv[4], name=name, role="client", arch="x86_64")
        assert outcome.from_store, outcome
    else:
        lifecycles.unregister(name)
    """
)


@pytest.mark.parametrize("workspace_harness", ["local"], indirect=True)
def test_changes_another_process_makes_are_seen_at_the_next_read(
    lab: PublishLab, world_readable_tmp: Any
) -> None:
    lab.finished(A, name="one")
    lab.publish(A)
    profile = world_readable_tmp / "site.toml"
    profile.write_text(
        f'workspace_root = "{lab.harness.root}"\n'
        '[image_build]\npartition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\n'
        'time_limit = "1:00:00"\n[submitter]\nkind = "fake"\n'
    )
    reader = _indexed(LocalStore.reader(lab.harness.root))
    assert reader.names() == ["one"]

    def other(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-c", OTHER_PROCESS, str(profile), *args],
            env={"PYTHONPATH": PACKAGE_DIR, "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    other("import", "two", SOURCE)
    assert sorted(reader.names()) == ["one", "two"]
    assert reader.show("two").record["name"] == "two"
    other("unregister", "one")
    with pytest.raises(UnknownAlias):
        reader.show("one")
    assert reader.names() == ["two"]
