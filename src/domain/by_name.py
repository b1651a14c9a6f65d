"""Run by name (docs/cli.md, "path"): the stable path of each published alias's image, a symlink
that always names the alias's current artifact, and how long an artifact an alias let go of is
kept for the jobs that started with it.

Layout below ``<workspace>/images/by-name/`` (``BY_NAME``):

- ``<architecture>/<alias>.sqsh``: a public alias's image for that architecture (``unknown``
  for an alias published before architectures were recorded), a relative symlink to
  ``artifacts/<sqsh sha256>.sqsh``;
- ``groups/<group>/<architecture>/<alias>.sqsh``: a private alias's, in a directory of its group
  (0750, group-owned) that the group alone may search.

A link is replaced by ``rename(2)`` of a fresh one made beside it (``.<alias>.sqsh.<hex>.tmp``:
no alias name starts with a dot), so a reader resolves the old artifact or the new, never
nothing. ``released/<sqsh sha256>.json`` records when an artifact lost an alias: ``gc`` keeps an
artifact no alias names for the grace period after that (``DEFAULT_RELEASE_GRACE``).
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from datetime import datetime, timedelta

from slurm_image.domain import paths
from slurm_image.domain.account_names import account_name
from slurm_image.domain.architecture import ARCHITECTURES
from slurm_image.domain.errors import DomainError, InvalidRecord
from slurm_image.domain.store_layout import StoreLayout, hex_digest

BY_NAME = "by-name"
GROUPS = "groups"
UNKNOWN_ARCHITECTURE = "unknown"
"""The directory of the links of aliases published before architectures were recorded."""
LINK_DIRECTORY_MODE = 0o755
PRIVATE_LINK_DIRECTORY_MODE = 0o750
"""A private alias's links: searched by its group alone, as its artifact is read by it alone."""
RELEASED_MODE = 0o600
DEFAULT_RELEASE_GRACE = timedelta(days=2)
"""How long ``gc`` keeps an artifact after its last alias let go of it (``[store]
release_grace``): a job that resolved the stable path before a replace reads the old file."""
RELEASED_MAX_BYTES = 1024


@dataclass(frozen=True)
class StablePath:
    """What ``path NAME`` answers: the alias's stable path for one architecture and the
    digest-pinned artifact it names now."""

    name: str
    architecture: str | None
    path: str
    pinned: str

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "architecture": self.architecture,
            "path": self.path,
            "pinned": self.pinned,
        }


class NameLayout:
    """The paths of the stable links under one store (see the module docstring)."""

    def __init__(self, layout: StoreLayout) -> None:
        self.store = layout

    @property
    def root(self) -> str:
        return f"{self.store.images}/{BY_NAME}"

    @property
    def groups(self) -> str:
        return f"{self.root}/{GROUPS}"

    @property
    def released(self) -> str:
        return f"{self.store.images}/released"

    def group(self, group: str) -> str:
        return f"{self.groups}/{account_name(group, 'group')}"

    def directory(self, architecture: str | None, group: str | None) -> str:
        """The directory of the links for ``architecture`` of a public alias (``group`` None)
        or of a private alias of ``group``."""
        arch = UNKNOWN_ARCHITECTURE if architecture is None else architecture
        if arch not in (*ARCHITECTURES, UNKNOWN_ARCHITECTURE):
            raise InvalidRecord(field="architecture", rule="is no architecture the store knows")
        base = self.root if group is None else self.group(group)
        return f"{base}/{arch}"

    def link(self, name: str, architecture: str | None, group: str | None) -> str:
        return f"{self.directory(architecture, group)}/{paths.name(name)}.sqsh"

    def released_record(self, sqsh_sha256: str) -> str:
        return f"{self.released}/{hex_digest(sqsh_sha256, 'sqsh_sha256')}.json"


def stable_path_of(
    name: str, artifact: str, architecture: str | None, private_group: str | None
) -> str | None:
    """The stable path of alias ``name``'s entry whose artifact is ``artifact``, in the store
    that holds it (what ``show`` prints and the page's ``srun`` line runs); None when
    ``artifact`` is no store's (``path NAME`` also checks that the link is there)."""
    images, found, _ = artifact.rpartition("/artifacts/")
    if not found or not images.endswith("/images"):
        return None
    try:
        layout = StoreLayout(images.removesuffix("/images"))
        if layout.in_store(artifact) is None:
            return None
        return NameLayout(layout).link(name, architecture, private_group)
    except DomainError:
        return None


def link_target(link: str, artifact: str) -> str:
    """What the symlink at ``link`` holds to name ``artifact``: a path relative to the link's
    directory, so that the store resolves wherever it is mounted."""
    return posixpath.relpath(artifact, posixpath.dirname(link))


def released_bytes(at: datetime) -> bytes:
    return json.dumps({"released_at": at.isoformat()}, sort_keys=True).encode()


def released_at(data: bytes) -> datetime | None:
    """When a released record says the artifact lost its alias; None when it says nothing
    readable (the artifact is then kept no longer than any other)."""
    try:
        value = json.loads(data)["released_at"]
        at = datetime.fromisoformat(value)
    except (ValueError, TypeError, KeyError):
        return None
    return at if at.tzinfo is not None else None


def within_grace(released: datetime | None, now: datetime, grace: timedelta) -> bool:
    """Whether an artifact released at ``released`` is still kept at ``now``."""
    return released is not None and now - released < grace
