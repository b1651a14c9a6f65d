"""The site's image policy (docs/design.md, "Image policy and signatures"): which registries an
import may name, and whether the pinned digest must carry a signature by one of the site's keys.

The profile's ``[policy]`` table (and that of each cluster of a catalog) is read here; the
check of a source against ``allowed_registries`` is ``require_allowed_source``, the one place
that rule lives. Key files are held, when read, to ``paths.unchangeable_file_problem``: a key
that someone else could replace would let them choose what is trusted. A site policy file
(``/etc/slurm-image/policy.toml``) holds a table of the same shape; ``strictest`` is how it
meets the profile's: on every point the stricter of the two.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ValidationError, field_validator, model_validator

from slurm_image.domain import paths
from slurm_image.domain.errors import DomainError, InvalidProfile, SourceNotAllowed
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


def strictest(site: Policy, profile: Policy | None) -> Policy:
    """The policy in force under the site policy ``site`` when the profile (with its
    ``SLURM_IMAGE_POLICY__*`` overrides) says ``profile``: on every point the stricter one.

    - ``allowed_registries``: what both allow. An empty list allows any registry, so the other
      list stands; otherwise each pair of entries where one lies within the other gives the
      narrower one (a profile narrows the site's list, it never widens it), and two lists that
      share nothing are refused: ``InvalidProfile`` of ``policy.allowed_registries``.
    - ``require_signature``: set when either sets it.
    - ``keys``: the site's alone when it names any (a profile cannot add a key the site does
      not trust), else the profile's.
    """
    if profile is None:
        return site
    try:
        return Policy(
            allowed_registries=_common_registries(site, profile),
            require_signature=site.require_signature or profile.require_signature,
            keys=site.keys or profile.keys,
        )
    except ValidationError as error:
        raise InvalidProfile(
            field="policy",
            rule="with the site policy: " + error.errors()[0]["msg"].removeprefix("Value error, "),
        ) from None


def _common_registries(site: Policy, profile: Policy) -> tuple[str, ...]:
    if not site.allowed_registries:
        return profile.allowed_registries
    if not profile.allowed_registries:
        return site.allowed_registries
    common: list[str] = []
    for site_text, site_prefix in zip(site.allowed_registries, site.prefixes, strict=True):
        for text, prefix in zip(profile.allowed_registries, profile.prefixes, strict=True):
            if prefix.within(site_prefix):
                common.append(text)
            elif site_prefix.within(prefix):
                common.append(site_text)
    if not common:
        raise InvalidProfile(
            field="policy.allowed_registries",
            rule=f"allows nothing the site policy allows ({', '.join(site.allowed_registries)}):"
            " a profile can narrow the site's registries, never widen them",
        )
    return tuple(dict.fromkeys(common))
