"""``SignedBy``: what the plan, the alias entry and the source record keep of the signature the
site policy accepted for an import (docs/design.md, "Image policy and signatures"). A module of
its own, without ``cryptography``, so the store's readers (``show``, ``list``) load nothing
they do not need; ``domain.signatures`` verifies."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, field_validator

from slurm_image.domain.model_config import FROZEN

SignatureFormat = Literal["sigstore-bundle", "cosign-legacy"]
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HOLDER = re.compile(r"sha256:[0-9a-f]{64}(#sha256:[0-9a-f]{64})?")


class SignedBy(BaseModel):
    """The policy key's fingerprint (``sha256:`` and the SHA-256 of its DER public key), the
    signature's format, the digest of what holds it (a legacy signature's manifest and layer,
    ``<manifest>#<layer>``), and the digest its payload names (the pin, or the pinned index's
    manifest for the architecture imported)."""

    model_config = FROZEN

    key_fingerprint: str
    format: SignatureFormat
    digest: str
    signed_digest: str

    @field_validator("key_fingerprint", "signed_digest")
    @classmethod
    def _digest(cls, value: str) -> str:
        if not _DIGEST.fullmatch(value):
            raise ValueError("must be sha256:<64 lowercase hex>")
        return value

    @field_validator("digest")
    @classmethod
    def _holder(cls, value: str) -> str:
        if not _HOLDER.fullmatch(value):
            raise ValueError("must be sha256:<64 hex>, or two of them joined by #")
        return value
