"""Which published images their tag has moved away from (docs/design.md, "Outdated").

For every published entry (or those of the aliases named) whose record carries the tag it was
resolved from, the tag is resolved again and the entry reported as

- ``current``: the tag still pins the digest recorded, or, for an index that moved, still
  names the manifest this entry's architecture was imported from (the entry's chain);
- ``moved``: it pins another image now; the new pin (and the manifest for the entry's
  architecture) is reported, ready for ``import --replace``;
- ``gone``: the registry has no such tag any more, or its index no image for the entry's
  architecture;
- ``unknown``: the entry records no tag (published from a pinned reference, an inspected
  ``.sqsh``, or before tags were recorded);
- ``failed``: the tag could not be resolved now (the registry unreachable, credentials
  refused, an answer refused): ``error`` says why.

Each tag is asked once per call, whatever number of entries carry it, and all of them within
one ``timeout_s`` (``RegistryBudget``): a tag left without time is ``failed``. Nothing is
changed.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from slurm_image.application.catalog import Catalog
from slurm_image.application.registry_budget import RegistryBudget
from slurm_image.application.resolve import DEFAULT_TIMEOUT_S, Resolution, ResolveTag
from slurm_image.domain.errors import NoImageForArchitecture, SlurmImageError
from slurm_image.domain.profile import SiteProfile
from slurm_image.domain.publication import AliasRecord
from slurm_image.ports.clock import Clock
from slurm_image.ports.registry import RegistryNotFound

log = logging.getLogger(__name__)


class TagState(StrEnum):
    CURRENT = "current"
    MOVED = "moved"
    GONE = "gone"
    UNKNOWN = "unknown"
    FAILED = "failed"


@dataclass(frozen=True)
class OutdatedEntry:
    """One published entry and what its tag says now (see the module docstring)."""

    name: str
    architecture: str | None
    role: str
    state: TagState
    tag: str | None = None
    pinned: str | None = None
    """The pin the entry was imported from: ``tag@digest`` as resolved then."""
    new_pin: str | None = None
    """``moved``: the pin the tag resolves to now."""
    manifest: str | None = None
    """``moved``: the manifest an import of the new pin for the entry's architecture gets."""
    reason: str | None = None
    error: SlurmImageError | None = field(default=None, compare=False)
    """``failed``: the error, for the command's exit code."""

    def as_dict(self) -> dict[str, object]:
        """The keys ``outdated --json`` prints per entry (docs/cli.md, "outdated")."""
        return {
            "name": self.name,
            "architecture": self.architecture,
            "role": self.role,
            "state": str(self.state),
            "tag": self.tag,
            "pinned": self.pinned,
            "new_pin": self.new_pin,
            "manifest": self.manifest,
            "reason": self.reason,
        }


class Outdated:
    """Resolve again the tag of every published entry that records one (module docstring)."""

    def __init__(self, catalog: Catalog, resolve: ResolveTag, clock: Clock) -> None:
        self._catalog = catalog
        self._resolve = resolve
        self._clock = clock

    def __call__(
        self,
        profile: SiteProfile,
        names: Sequence[str] = (),
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> list[OutdatedEntry]:
        """The entries of ``names`` (every published alias when none; an unknown one raises
        ``UnknownAlias`` before the first registry is asked), each with its tag's state, every
        tag asked within ``timeout_s`` in all."""
        if names:
            entries = [
                entry
                for name in dict.fromkeys(names)
                for entry in self._catalog.document(name).entries
            ]
        else:
            entries = self._catalog.list()
        answers: dict[str, Resolution | SlurmImageError] = {}
        budget = RegistryBudget(self._clock, timeout_s)
        found = []
        for entry in entries:
            resolved_from = entry.resolved_from
            if resolved_from is None:
                found.append(_entry(entry, TagState.UNKNOWN, reason="no tag recorded"))
                continue
            tag = resolved_from.tag
            if tag not in answers:
                try:
                    left = budget.left(tag, f"the tag {tag}")
                    answers[tag] = self._resolve(tag, profile, timeout_s=left)
                except SlurmImageError as error:
                    answers[tag] = error
            found.append(_compare(entry, answers[tag]))
        return found


def _entry(
    record: AliasRecord,
    state: TagState,
    *,
    new_pin: str | None = None,
    manifest: str | None = None,
    reason: str | None = None,
    error: SlurmImageError | None = None,
) -> OutdatedEntry:
    resolved_from = record.resolved_from
    return OutdatedEntry(
        name=record.name,
        architecture=record.architecture,
        role=record.role,
        state=state,
        tag=resolved_from.tag if resolved_from else None,
        pinned=resolved_from.pinned if resolved_from else None,
        new_pin=new_pin,
        manifest=manifest,
        reason=reason,
        error=error,
    )


def _compare(record: AliasRecord, answer: Resolution | SlurmImageError) -> OutdatedEntry:
    resolved_from = record.resolved_from
    assert resolved_from is not None
    if isinstance(answer, RegistryNotFound):
        return _entry(record, TagState.GONE, reason=f"{answer.field}: {answer.rule}")
    if isinstance(answer, SlurmImageError):
        return _entry(
            record, TagState.FAILED, reason=f"{answer.field}: {answer.rule}", error=answer
        )
    manifest: str | None = None
    if record.architecture is not None:
        try:
            manifest = answer.manifest_for(record.architecture)
        except NoImageForArchitecture as error:
            return _entry(record, TagState.GONE, reason=error.rule)
    imported = record.chain.manifest if record.chain is not None else None
    if answer.digest == resolved_from.digest:
        return _entry(record, TagState.CURRENT)
    if manifest is not None and manifest == imported:
        return _entry(
            record,
            TagState.CURRENT,
            reason=f"the tag's index moved to {answer.digest}, but names the same"
            f" {record.architecture} manifest {manifest}",
        )
    log.info(
        "%s (%s): %s moved to %s",
        record.name,
        record.architecture,
        resolved_from.tag,
        answer.digest,
    )
    return _entry(record, TagState.MOVED, new_pin=answer.pinned, manifest=manifest)
