"""A registry's answer for a tag, read as untrusted input (docs/design.md, "Resolving a tag"):
the bytes of a manifest or an index, their digest, and for an index the manifest it names per
platform. No I/O: the ``Registry`` port fetches the bytes, this module decides what they are.

The digest of a tag is the SHA-256 of the bytes the registry sent, hashed here. A
``Docker-Content-Digest`` header is the registry's claim about those bytes: one that disagrees
is refused, never believed. The media types are the four the import job's verifying curl and
Enroot read (docs/enroot.md, "Import"): an OCI index, a Docker manifest list, an OCI manifest
and a Docker v2 schema 2 manifest.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import BaseModel

from slurm_image.domain.architecture import ARCHITECTURES, oci_name
from slurm_image.domain.errors import (
    InvalidRegistryAnswer,
    NoImageForArchitecture,
    RegistryDigestMismatch,
)
from slurm_image.domain.model_config import FROZEN
from slurm_image.domain.registry_text import registry_text
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_V2S2 = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_V2S2)
MEDIA_TYPES = (*INDEX_TYPES, *MANIFEST_TYPES)
ACCEPT = ", ".join(MEDIA_TYPES)
"""The ``Accept`` header of a request for a tag: every type the import reads, nothing else."""
MANIFEST_MAX_BYTES = 4 * 1024 * 1024
"""The largest answer read: a manifest or index beyond it is refused (real ones are kilobytes;
an index of every platform of a big image stays far below)."""
INDEX_MAX_ENTRIES = 1000

_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")
_SHA512 = re.compile(r"sha512:[0-9a-f]{128}")
_TEXT_MAX = 100
_GENERIC_TYPES = frozenset({"application/json", "application/octet-stream", "text/plain"})
"""A ``Content-Type`` that names no manifest type: the body's ``mediaType`` decides."""


class Platform(BaseModel):
    """An index entry's platform, as the registry wrote it (OCI names: ``amd64``, ``arm64``)."""

    model_config = FROZEN

    os: str
    architecture: str
    variant: str | None = None

    def describe(self) -> str:
        variant = f"/{self.variant}" if self.variant else ""
        return f"{self.os}/{self.architecture}{variant}"


class IndexEntry(BaseModel):
    """One manifest an index names: its digest, media type, size and platform (None when the
    entry names none)."""

    model_config = FROZEN

    digest: str
    media_type: str
    size: int
    platform: Platform | None = None

    def as_dict(self) -> dict[str, object]:
        platform = None if self.platform is None else self.platform.model_dump(mode="json")
        return {
            "digest": self.digest,
            "media_type": self.media_type,
            "size": self.size,
            "platform": platform,
        }


class RegistryManifest(BaseModel):
    """What a registry answered for a tag: ``digest`` is the SHA-256 of its bytes (hashed here),
    ``media_type`` one of ``MEDIA_TYPES``, ``entries`` the manifests of an index (empty for a
    manifest)."""

    model_config = FROZEN

    digest: str
    media_type: str
    size: int
    entries: tuple[IndexEntry, ...] = ()

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def manifest_for(self, architecture: str, *, field: str = "arch") -> str:
        """The digest of the manifest an import for ``architecture`` (a uname name) gets: for an
        index the first entry whose ``platform.architecture`` is its OCI name, as Enroot picks
        it (``os`` and ``variant`` not looked at; the job's verifying curl lets only that one
        through); for a manifest the manifest itself (the import job checks its config's
        architecture). Raises ``NoImageForArchitecture`` naming what the index holds."""
        wanted = oci_name(architecture)
        if not self.is_index:
            return self.digest
        for entry in self.entries:
            if entry.platform is not None and entry.platform.architecture == wanted:
                return entry.digest
        held = sorted(
            {entry.platform.describe() for entry in self.entries if entry.platform is not None}
        )
        raise NoImageForArchitecture(
            field=field,
            rule=f"the index {self.digest} holds no image for {architecture} ({wanted}); it"
            f" holds: {', '.join(held) or 'no platform'} (the product's names:"
            f" {', '.join(ARCHITECTURES)})",
            value=architecture,
        )


def _refuse(field: str, rule: str) -> InvalidRegistryAnswer:
    return InvalidRegistryAnswer(field=field, rule=rule)


def _short(value: object) -> str:
    return registry_text(value, limit=_TEXT_MAX)


def check_content_digest(data: bytes, content_digest: str | None, *, field: str) -> str:
    """The ``sha256:<hex>`` of ``data``; a ``Docker-Content-Digest`` that names other bytes
    (or is not a sha256 or sha512 digest) is refused: the registry's claim is never believed."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if content_digest is None:
        return digest
    claimed = content_digest.strip()
    if _SHA256.fullmatch(claimed):
        actual = digest
    elif _SHA512.fullmatch(claimed):
        actual = "sha512:" + hashlib.sha512(data).hexdigest()
    else:
        raise _refuse(
            field,
            f"the registry's Docker-Content-Digest {_short(claimed)!r} is not a sha256 or sha512"
            " digest: refused",
        )
    if claimed != actual:
        raise RegistryDigestMismatch(
            field=field,
            rule=f"the registry's Docker-Content-Digest {claimed} disagrees with the bytes it"
            f" sent ({actual}): refused, nothing was pinned",
        )
    return digest


def _media_type(content_type: str | None, body: dict[str, Any], field: str) -> str:
    declared = body.get("mediaType")
    if declared is not None and not isinstance(declared, str):
        raise _refuse(field, "the answer's mediaType is not a string")
    header = (content_type or "").split(";", 1)[0].strip().lower() or None
    if header in MEDIA_TYPES:
        if declared is not None and declared != header:
            raise _refuse(
                field,
                f"the answer is sent as {header} but says it is {_short(declared)}: refused",
            )
        return header
    if (header is None or header in _GENERIC_TYPES) and declared in MEDIA_TYPES:
        return declared
    named = header or declared or "no media type"
    raise _refuse(
        field,
        f"the answer is {_short(named)}, none of the types an import reads"
        f" ({', '.join(MEDIA_TYPES)}): refused",
    )


def _entry(raw: object, position: int, field: str) -> IndexEntry:
    where = f"manifests[{position}]"
    if not isinstance(raw, dict):
        raise _refuse(field, f"the index's {where} is not an object")
    digest, media_type, size = raw.get("digest"), raw.get("mediaType"), raw.get("size")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise _refuse(
            field, f"the index's {where}.digest {_short(digest)!r} is not sha256:<64 hex>"
        )
    if not isinstance(media_type, str):
        raise _refuse(field, f"the index's {where}.mediaType is not a string")
    if type(size) is not int or size < 0:
        raise _refuse(field, f"the index's {where}.size is not a size")
    platform = raw.get("platform")
    if platform is None:
        return IndexEntry(digest=digest, media_type=_short(media_type), size=size)
    if not isinstance(platform, dict):
        raise _refuse(field, f"the index's {where}.platform is not an object")
    os_name, architecture = platform.get("os"), platform.get("architecture")
    variant = platform.get("variant")
    if not isinstance(os_name, str) or not isinstance(architecture, str):
        raise _refuse(field, f"the index's {where}.platform needs os and architecture strings")
    if variant is not None and not isinstance(variant, str):
        raise _refuse(field, f"the index's {where}.platform.variant is not a string")
    return IndexEntry(
        digest=digest,
        media_type=_short(media_type),
        size=size,
        platform=Platform(
            os=_short(os_name),
            architecture=_short(architecture),
            variant=None if variant is None else _short(variant),
        ),
    )


def read_manifest(
    data: bytes, *, content_type: str | None, content_digest: str | None, field: str
) -> RegistryManifest:
    """The registry's answer ``data`` (sent as ``content_type``, claimed by ``content_digest``)
    as a manifest or an index; ``field`` names what was asked for in every refusal.

    Raises ``InvalidRegistryAnswer`` for an answer over ``MANIFEST_MAX_BYTES``, a
    ``Docker-Content-Digest`` that disagrees with the bytes, and anything that is not a
    schema 2 manifest or index of ``MEDIA_TYPES``.
    """
    if len(data) > MANIFEST_MAX_BYTES:
        raise _refuse(field, f"the answer is larger than {MANIFEST_MAX_BYTES} bytes: refused")
    digest = check_content_digest(data, content_digest, field=field)
    try:
        body = load_untrusted_json(data)
    except UnreadableJson as error:
        raise _refuse(field, f"the answer {error.reason}: refused") from None
    if not isinstance(body, dict):
        raise _refuse(field, "the answer is not a JSON object: refused")
    if body.get("schemaVersion") != 2 or type(body.get("schemaVersion")) is not int:
        raise _refuse(field, "the answer is not a schema version 2 manifest or index: refused")
    media_type = _media_type(content_type, body, field)
    if media_type in INDEX_TYPES:
        manifests = body.get("manifests")
        if not isinstance(manifests, list):
            raise _refuse(field, "the index has no manifests list: refused")
        if len(manifests) > INDEX_MAX_ENTRIES:
            raise _refuse(field, f"the index names more than {INDEX_MAX_ENTRIES} manifests")
        entries = tuple(_entry(raw, n, field) for n, raw in enumerate(manifests))
        return RegistryManifest(
            digest=digest, media_type=media_type, size=len(data), entries=entries
        )
    config = body.get("config")
    if not isinstance(config, dict) or not isinstance(body.get("layers"), list):
        raise _refuse(field, "the manifest has no config object or no layers list: refused")
    config_digest = config.get("digest")
    if not isinstance(config_digest, str) or not _SHA256.fullmatch(config_digest):
        raise _refuse(
            field, f"the manifest's config.digest {_short(config_digest)!r} is not sha256:<64 hex>"
        )
    return RegistryManifest(digest=digest, media_type=media_type, size=len(data))
