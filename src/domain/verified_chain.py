"""The verified chain of an import: the pinned digest, the per-architecture manifest it led to
(the pin itself unless the pin is an index) and that manifest's image config, each hashed by
the job before Enroot could use it (README, Threat model).

The job writes it to the attempt's ``chain.json`` only when every link verified; the store keeps
the same three digests beside the source they prove (``SourceRecord``, ``AliasRecord``). A
source without them was recorded before anything was verified and proves nothing.

Standard library only, like ``identity.py``: the catalog's cheap read checks the same rules, and
the records that embed a chain (pydantic models) validate it through ``__post_init__``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from slurm_image.domain.errors import InvalidRecord

CHAIN_RECORD_MAX_BYTES = 1024
"""``chain.json`` holds three digests on one line (about 240 bytes)."""
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_DIGEST_RULE = "must be sha256: and 64 lowercase hex"


@dataclass(frozen=True)
class VerifiedChain:
    """Three ``sha256:<hex>`` digests: ``pinned`` led to ``manifest``, which names ``config``."""

    pinned: str
    manifest: str
    config: str

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if type(value) is not str or not _DIGEST.fullmatch(value):
                raise InvalidRecord(field=f"chain.{field.name}", rule=_DIGEST_RULE, value=value)

    @classmethod
    def from_mapping(cls, value: object) -> VerifiedChain:
        """The chain an already parsed JSON value describes: an object with exactly
        ``pinned``, ``manifest`` and ``config``; raises ``InvalidRecord`` naming the field."""
        if not isinstance(value, dict):
            raise InvalidRecord(
                field="chain", rule="must be an object of pinned, manifest and config"
            )
        names = [field.name for field in fields(cls)]
        for key in value:
            if key not in names:
                raise InvalidRecord(field=f"chain.{key}", rule="is not a field of the chain")
        for name in names:
            if name not in value:
                raise InvalidRecord(field=f"chain.{name}", rule="is required")
        return cls(**value)

    def record_bytes(self) -> bytes:
        """``chain.json`` in its one form, as the job writes it: one line, keys sorted."""
        hexes = tuple(getattr(self, name).removeprefix("sha256:") for name in RECORD_FIELDS)
        return (RECORD_FORMAT % hexes + "\n").encode()


RECORD_FIELDS = tuple(sorted(field.name for field in fields(VerifiedChain)))
"""The order of the digests in ``RECORD_FORMAT``."""
RECORD_FORMAT = json.dumps({name: "sha256:%s" for name in RECORD_FIELDS}, sort_keys=True)
"""``chain.json``'s one line as a ``printf`` format of the digests' hex in ``RECORD_FIELDS``
order: the job writes it with this format, the host compares with ``record_bytes``."""


def validate_chain_record(
    data: bytes, *, pinned: str, max_bytes: int = CHAIN_RECORD_MAX_BYTES
) -> VerifiedChain:
    """Validate the bytes of an attempt's ``chain.json`` for an import pinned to ``pinned``;
    raise ``InvalidRecord`` naming the field and the rule. The job wrote it, but from a
    directory that a failed or replaced job could have left anything in: bounded, one JSON
    object of exactly the three digests in the job's own form, and its pin the plan's."""
    if len(data) > max_bytes:
        raise InvalidRecord(
            field="chain", rule=f"must be at most {max_bytes} bytes", value=len(data)
        )
    try:
        parsed: Any = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested past the stack
        raise InvalidRecord(field="chain", rule="must be one UTF-8 JSON object") from None
    chain = VerifiedChain.from_mapping(parsed)
    if chain.record_bytes() != data:
        raise InvalidRecord(
            field="chain", rule="must be in the form the job writes (one line, keys sorted)"
        )
    if chain.pinned != pinned:
        raise InvalidRecord(
            field="chain.pinned",
            rule=f"must be the plan's source digest {pinned}",
            value=chain.pinned,
        )
    return chain


def check_chain_source(source_digest: str | None, chain: VerifiedChain | None) -> None:
    """A record's chain proves its source: the record's source digest is the chain's pin, or
    the per-architecture manifest the pin led to (the same image, asked for by its own digest)."""
    if chain is None:
        return
    if source_digest is None:
        raise InvalidRecord(field="chain", rule="is recorded only for a source digest")
    if source_digest not in (chain.pinned, chain.manifest):
        raise InvalidRecord(
            field="chain.pinned",
            rule="must equal source_digest (or the chain's manifest must)",
            value=chain.pinned,
        )
