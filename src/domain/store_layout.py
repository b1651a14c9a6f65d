"""Where the store keeps things (docs/design.md, "The store"), with every name checked, and the
modes of what it publishes. Standard library only: reading the catalog needs nothing else.

Layout below ``<workspace>/images/`` — one small file per thing, each replaced by rename, so a
reader opens one file and publishers of different aliases never touch the same file:

- ``artifacts/<sqsh sha256>.sqsh`` (0444): the content-addressed images;
- ``aliases/<name>.json``: the published record of one alias (``AliasRecord``);
- ``sources/<source digest hex>.<architecture>.json``: which artifact an OCI source became
  for that architecture, with the facts recorded for it per role (``SourceRecord``);
  ``sources/<source digest hex>.json``: the same, recorded before architectures were;
- ``history/YYYY-MM.jsonl`` (0644, the directory 0755): the store's history, one JSON line
  per event, one file per month (``domain.history``), appended to, never rewritten;
- ``by-name/`` and ``released/``: the aliases' stable paths and when an artifact lost an alias
  (``domain.by_name``);
- ``aliases.begun`` and ``aliases.done`` (0644): one byte appended to each around every change
  of ``aliases/`` (``application.catalog_changes``), so that their sizes tell a reader whether
  the aliases changed since it last looked;
- ``locks/``: fcntl lock files; ``.tmp/markers/<name>.json``: the transaction marker of a
  publication in progress; ``.tmp/publish/`` and ``.tmp/sources/``: temporary records. Nothing
  under ``.tmp/`` is ever read as published state.
"""

from __future__ import annotations

import re

from slurm_image.domain import paths
from slurm_image.domain.architecture import ARCHITECTURES, check_architecture
from slurm_image.domain.canonical import SHA256_HEX
from slurm_image.domain.errors import InvalidRecord

STORE_RECORD_MAX_BYTES = 16 * 1024 * 1024
"""Records hold an image's facts (an inspection is at most 1 MiB): an alias file one entry per
architecture (three), a source record one per role, a publication marker an alias file, its
entry and two source records."""
ARTIFACT_MODE = 0o444
RECORD_MODE = 0o644
PUBLIC_DIRECTORY_MODE = 0o755
PRIVATE_ARTIFACT_MODE = 0o440
"""An artifact imported with a requester's own registry credentials: its group reads it."""
PRIVATE_RECORD_MODE = 0o640
"""The records of such an artifact: its alias and source records, for its group alone."""
HISTORY_MONTH_FILE = re.compile(r"(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])\.jsonl")
"""The name of one month's file in ``history/``."""


class StoreLayout:
    """Paths of the store under one workspace root. Pure path arithmetic, every name checked."""

    def __init__(self, root: str) -> None:
        self.root = paths.workspace_root(root)

    @property
    def images(self) -> str:
        return f"{self.root}/images"

    @property
    def artifacts(self) -> str:
        return f"{self.images}/artifacts"

    @property
    def aliases(self) -> str:
        return f"{self.images}/aliases"

    @property
    def sources(self) -> str:
        return f"{self.images}/sources"

    @property
    def history(self) -> str:
        return f"{self.images}/history"

    def history_file(self, month_file: str) -> str:
        """The history file of one month, by its name (``YYYY-MM.jsonl``)."""
        if HISTORY_MONTH_FILE.fullmatch(month_file) is None:
            raise InvalidRecord(field="history", rule="a month file is named YYYY-MM.jsonl")
        return f"{self.history}/{month_file}"

    @property
    def aliases_begun(self) -> str:
        return f"{self.images}/aliases.begun"

    @property
    def aliases_done(self) -> str:
        return f"{self.images}/aliases.done"

    @property
    def locks(self) -> str:
        return f"{self.images}/locks"

    @property
    def tmp(self) -> str:
        return f"{self.images}/.tmp"

    @property
    def publishing(self) -> str:
        return f"{self.tmp}/publish"

    @property
    def markers(self) -> str:
        return f"{self.tmp}/markers"

    @property
    def staging(self) -> str:
        """Temporary source records (written without the alias lock)."""
        return f"{self.tmp}/sources"

    @property
    def jobs(self) -> str:
        return f"{self.tmp}/jobs"

    @property
    def orders(self) -> str:
        """The order books of lifecycles in flight (``domain.orders``)."""
        return f"{self.tmp}/orders"

    def order_book(self, lifecycle_id: str) -> str:
        return f"{self.orders}/{paths.name(lifecycle_id, 'lifecycle_id')}.json"

    def artifact(self, sqsh_sha256: str) -> str:
        return f"{self.artifacts}/{hex_digest(sqsh_sha256, 'sqsh_sha256')}.sqsh"

    def alias(self, name: str) -> str:
        return f"{self.aliases}/{paths.name(name)}.json"

    def source(self, source_digest: str, architecture: str | None) -> str:
        """The source record of ``source_digest`` for ``architecture`` (None: the record of a
        source imported before architectures were recorded)."""
        digest = hex_digest(source_digest.removeprefix("sha256:"), "source_digest")
        if architecture is None:
            return f"{self.sources}/{digest}.json"
        return f"{self.sources}/{digest}.{check_architecture(architecture, 'architecture')}.json"

    def marker(self, name: str) -> str:
        """The transaction marker of a publication of ``name`` (present while it is torn)."""
        return f"{self.markers}/{paths.name(name)}.json"

    def in_store(self, path: str) -> str | None:
        """The digest of ``path`` when it names an artifact of this store, else None."""
        prefix = f"{self.artifacts}/"
        if not path.startswith(prefix) or not path.endswith(".sqsh"):
            return None
        digest = path[len(prefix) : -len(".sqsh")]
        return digest if SHA256_HEX.fullmatch(digest) else None


def source_entry(entry: str) -> tuple[str, str | None] | None:
    """The (source digest, architecture) a file name in ``sources/`` stands for, or None."""
    stem = entry.removesuffix(".json")
    if stem == entry:
        return None
    digest, _, architecture = stem.partition(".")
    if not SHA256_HEX.fullmatch(digest):
        return None
    if not architecture:
        return f"sha256:{digest}", None
    return (f"sha256:{digest}", architecture) if architecture in ARCHITECTURES else None


def hex_digest(value: str, field: str) -> str:
    """``value`` when it is a SHA-256 as the store names things (64 lowercase hex)."""
    if not SHA256_HEX.fullmatch(value):
        raise InvalidRecord(field=field, rule="must be 64 lowercase hex", value=value)
    return value
