"""The inspection record the in-image inspector writes, and its host-side validation.

The record comes from inside an image whose code can write anything into the output directory,
so it is untrusted input: bounded in size, parsed strictly, every value constrained, and bound to
the role and ``.sqsh`` digest the host expects. The schema lives here, not in the inspector (the
domain never imports it); the two meet only through the JSON bytes.

Schema version 2 (written by the inspector since 2.0.0) adds ``facts.python.executable`` (the
resolved path of the interpreter the facts belong to) and ``facts.shadowed`` (copies of a
distribution that the effective one hides on ``sys.path``). Version 1 records, already
published, are still accepted; they have neither, and read as ``executable=None`` and
``shadowed=()``.

Schema version 3 (inspector 3.0.0) adds ``machine``: ``platform.machine()`` as the image's
python3 saw it (``uname -m``: the architecture it ran as, natively or under an emulator).
Records of versions 1 and 2 have none and read as ``machine=None``: of unknown architecture.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Discriminator,
    Field,
    StringConstraints,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from slurm_image.domain.canonical import SHA256_HEX
from slurm_image.domain.errors import InvalidInspection
from slurm_image.domain.model_config import FROZEN, absent_when_none
from slurm_image.domain.roles import ROLES, Role

SCHEMA_VERSION = 3
"""The version the inspector writes."""
SCHEMA_VERSIONS = (1, 2, 3)
"""The versions the host accepts."""
MAX_INSPECTION_BYTES = 1024 * 1024
MAX_DISTRIBUTIONS = 10_000

Sha256 = Annotated[str, StringConstraints(pattern=f"^{SHA256_HEX.pattern}$")]
DistributionName = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9](?:-?[a-z0-9])*$", max_length=200)
]
"""A PEP 503 normalized distribution name."""
Version = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,127}$")]
ExecutablePath = Annotated[
    str, StringConstraints(pattern=r"^(?:/[^/\x00-\x1f\x7f-\x9f]+)+$", max_length=4096)
]
"""Absolute, without empty components or control characters (C0, DEL and C1, as the path rules
of ``domain.paths``: a C1 CSI would reach the terminal of whoever lists the facts)."""
MAX_SHADOWED = 1_000
Machine = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")]
"""A ``platform.machine()`` name (``x86_64``, ``aarch64``, ...); domain.architecture says
which of them the product builds for."""


def _normalized(path: str) -> str:
    parts = path.split("/")[1:]
    if "." in parts or ".." in parts:
        raise ValueError("path must be normalized (no . or .. components)")
    return path


NormalizedPath = Annotated[ExecutablePath, AfterValidator(_normalized)]


class _Frozen(BaseModel):
    model_config = FROZEN


class PythonFacts(_Frozen):
    implementation: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,31}$")]
    version: Annotated[str, StringConstraints(pattern=r"^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$")]
    abi: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]
    executable: NormalizedPath | None = None
    """The interpreter's resolved path (schema version 2); None in version 1 records."""


class DistributionFact(_Frozen):
    name: DistributionName
    version: Version


class ShadowedFact(_Frozen):
    """A copy of a distribution that the effective one hides: later on ``sys.path``."""

    name: DistributionName
    version: Version
    location: NormalizedPath
    """The ``sys.path`` directory that holds its metadata."""


Shadowed = Annotated[tuple[ShadowedFact, ...], Field(max_length=MAX_SHADOWED)]


def _shadowed_in_order(shadowed: tuple[ShadowedFact, ...]) -> None:
    names = [s.name for s in shadowed]
    if names != sorted(names):
        raise ValueError("shadowed must be sorted by name")
    places = [(s.name, s.location) for s in shadowed]
    if len(places) != len(set(places)):
        raise ValueError("shadowed must name each location of a distribution once")


class ExecutableFact(_Frozen):
    version: Version
    path: NormalizedPath


class InstallerFact(ExecutableFact):
    name: Literal["pip"]


class ServerFact(ExecutableFact):
    name: Literal["vllm"]


class ClientFacts(_Frozen):
    python: PythonFacts
    distributions: tuple[DistributionFact, ...] = Field(min_length=1, max_length=MAX_DISTRIBUTIONS)
    installer: InstallerFact
    shadowed: Shadowed = ()
    """Schema version 2; empty in version 1 records."""

    @model_validator(mode="after")
    def _distributions_consistent(self) -> ClientFacts:
        names = [d.name for d in self.distributions]
        if names != sorted(set(names)):
            raise ValueError("distributions must be sorted by name, each name once")
        installed = {d.name: d.version for d in self.distributions}
        if installed.get(self.installer.name) != self.installer.version:
            raise ValueError("the installer must be one of the distributions, same version")
        _shadowed_in_order(self.shadowed)
        if any(s.name not in installed for s in self.shadowed):
            raise ValueError("a shadowed distribution must be one of the distributions")
        return self

    def version_of(self, name: str) -> str | None:
        return next((d.version for d in self.distributions if d.name == name), None)


class ServingFacts(_Frozen):
    server: ServerFact
    shadowed: Shadowed = ()
    """Schema version 2; empty in version 1 records."""

    @model_validator(mode="after")
    def _shadowed_consistent(self) -> ServingFacts:
        _shadowed_in_order(self.shadowed)
        return self


def _facts_kind(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "serving" if isinstance(value, ServingFacts) else "client"
    return "serving" if isinstance(value, dict) and "server" in value else "client"


Facts = Annotated[
    Annotated[ClientFacts, Tag("client")] | Annotated[ServingFacts, Tag("serving")],
    Discriminator(_facts_kind),
]


class InspectionRecord(_Frozen):
    schema_version: Annotated[int, Field(ge=min(SCHEMA_VERSIONS), le=max(SCHEMA_VERSIONS))]
    """An int field rather than ``Literal[1, 2]``, which pydantic also satisfies with ``true``."""
    inspector_version: Annotated[str, StringConstraints(pattern=r"^[0-9A-Za-z.+-]{1,32}$")]
    role: Role
    sqsh_sha256: Sha256
    facts: Facts
    machine: Machine | None = absent_when_none()
    """``platform.machine()`` inside the image (schema version 3); None in older records."""

    @model_validator(mode="after")
    def _facts_match_role(self) -> InspectionRecord:
        expected = ClientFacts if self.role == "client" else ServingFacts
        if not isinstance(self.facts, expected):
            raise PydanticCustomError(
                "facts_role", "facts must be those of a {role} image", {"role": self.role}
            )
        return self

    @model_validator(mode="after")
    def _facts_match_version(self) -> InspectionRecord:
        version = self.schema_version
        # (field, whether the record has it, the version that added it)
        given = [
            ("facts.shadowed", "shadowed" in self.facts.model_fields_set, 2),
            ("machine", self.machine is not None, 3),
        ]
        if isinstance(self.facts, ClientFacts):
            executable = self.facts.python.executable is not None
            given.append(("facts.python.executable", executable, 2))
        for field, present, since in given:
            if present != (version >= since):
                rule = "required" if version >= since else "not allowed"
                raise PydanticCustomError(
                    "facts_version",
                    "{rule} in schema version {version}",
                    {"field": field, "rule": rule, "version": version},
                )
        return self


def _refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidInspection(field=key, rule="each key at most once", value=key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise InvalidInspection(field="inspection", rule="no NaN or Infinity", value=name)


def validate_inspection(
    data: bytes,
    *,
    role: Role,
    sqsh_sha256: str,
    max_bytes: int = MAX_INSPECTION_BYTES,
) -> InspectionRecord:
    """Validate the bytes of ``inspection.json`` for an image of ``role`` whose ``.sqsh``
    hashes to ``sqsh_sha256``; raise InvalidInspection naming the field and the rule."""
    if len(data) > max_bytes:
        raise InvalidInspection(
            field="inspection", rule=f"at most {max_bytes} bytes", value=len(data)
        )
    try:
        parsed = json.loads(
            data.decode("utf-8"),
            object_pairs_hook=_refuse_duplicate_keys,
            parse_constant=_refuse_constant,
        )
    except InvalidInspection:
        raise
    except (ValueError, RecursionError) as error:
        # ValueError: not UTF-8, not JSON, or an integer past int()'s digit limit;
        # RecursionError: nesting deeper than the parser's stack, well within the size bound.
        raise InvalidInspection(
            field="inspection", rule="one UTF-8 JSON object", value=str(error)
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidInspection(
            field="inspection", rule="one UTF-8 JSON object", value=type(parsed).__name__
        )
    try:
        record = InspectionRecord.model_validate_json(data)
    except ValidationError as error:
        first = error.errors(include_url=False)[0]
        # the union's tag ("client"/"serving") after "facts" is not a field of the record
        loc = [str(p) for i, p in enumerate(first["loc"]) if not (i == 1 and p in ROLES)]
        if first["type"] == "facts_version":
            field = str((first.get("ctx") or {})["field"])
        else:
            field = ".".join(loc) or ("facts" if first["type"] == "facts_role" else "inspection")
        raise InvalidInspection(field=field, rule=first["msg"], value=first.get("input")) from None
    if record.role != role:
        raise InvalidInspection(field="role", rule=f"must be {role}", value=record.role)
    if record.sqsh_sha256 != sqsh_sha256:
        raise InvalidInspection(
            field="sqsh_sha256",
            rule=f"must equal the digest of the .sqsh ({sqsh_sha256})",
            value=record.sqsh_sha256,
        )
    return record
