"""The site's image policy (docs/design.md, "Image policy and signatures"): which registries an
import may name, and whether the pinned digest must carry a signature by one of the site's keys.

The profile's ``[policy]`` table (and that of each cluster of a catalog) is read here; the
check of a source against ``allowed_registries`` is ``require_allowed_source``, the one place
that rule lives. Key files are held, when read, to ``paths.unchangeable_file_problem``: a key
that someone else could replace would let them choose what is trusted.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, field_validator, model_validator

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, SourceNotAllowed
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.reference import (
    OciReference,
    RegistryPrefix,
    TagReference,
    parse_registry_prefix,
)

KEYS_MAX = 64
ALLOWED_REGISTRIES_MAX = 256


def _prefix(value: str) -> str:
    try:
        parse_registry_prefix(value)
    except DomainError as error:
        raise ValueError(f"{value!r}: {error.rule}") from None
    return value


def _key(value: str) -> str:
    try:
        return paths.key_file(value)
    except DomainError as error:
        raise ValueError(f"{value!r}: {error.rule}") from None


class Policy(BaseModel):
    """``[policy]``: ``allowed_registries`` (empty: any registry), ``require_signature`` and the
    public ``keys`` (PEM files, as ``cosign generate-key-pair`` writes them) a signature must
    verify against."""

    model_config = FROZEN

    allowed_registries: tuple[Annotated[str, AfterValidator(_prefix)], ...] = ()
    require_signature: bool = False
    keys: tuple[Annotated[str, AfterValidator(_key)], ...] = ()

    @field_validator("allowed_registries", "keys", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("allowed_registries")
    @classmethod
    def _registries(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > ALLOWED_REGISTRIES_MAX:
            raise ValueError(f"must list at most {ALLOWED_REGISTRIES_MAX} registries")
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(value) > KEYS_MAX:
            raise ValueError(f"must list at most {KEYS_MAX} keys")
        if len(set(value)) != len(value):
            raise ValueError("must not repeat a key file")
        return value

    @model_validator(mode="after")
    def _keys_for_signatures(self) -> Policy:
        if self.require_signature and not self.keys:
            raise ValueError(
                "require_signature needs at least one key in policy.keys"
                " (keyless signatures are not verified)"
            )
        return self

    @property
    def prefixes(self) -> tuple[RegistryPrefix, ...]:
        return tuple(parse_registry_prefix(item) for item in self.allowed_registries)


def require_allowed_source(reference: OciReference | TagReference, policy: Policy | None) -> None:
    """Refuse a source outside the policy's ``allowed_registries`` (none listed: any is
    allowed). ``SourceNotAllowed`` (an ``InvalidRequest``) of ``source`` naming the rule."""
    if policy is None or not policy.allowed_registries:
        return
    if any(prefix.covers(reference) for prefix in policy.prefixes):
        return
    allowed = ", ".join(policy.allowed_registries)
    raise SourceNotAllowed(
        field="source",
        rule=f"is outside policy.allowed_registries ({allowed}): the registry and the start of"
        " the repository path must be one of them, whole path components only",
        value=str(reference),
    )
