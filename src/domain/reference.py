"""OCI image references: the distribution grammar, our rules, and Enroot's URI form."""

from __future__ import annotations

import ipaddress
import re

from pydantic import BaseModel

from slurm_image.domain.errors import InvalidReference
from slurm_image.domain.model_config import FROZEN

FIELD = "source"
PATH_MAX = 255
"""The repository path as the registry receives it (Docker Hub's ``library/`` included), host
not counted: distribution/reference's ``NameTotalLengthMax``."""
REFERENCE_MAX = 1024
"""An input bound only, above any reference the grammar accepts with a DNS-length host."""
DOCKER_HUB = "registry-1.docker.io"
_DOCKER_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", DOCKER_HUB})

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = re.compile(rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_PORT = re.compile(r"[1-9][0-9]{0,4}")
_IPV6_CHARACTERS = re.compile(r"[0-9A-Fa-f:]+")


class OciReference(BaseModel):
    """A digest-pinned OCI reference, split into its parts."""

    model_config = FROZEN

    registry: str | None
    """The registry host[:port] as written, or None for Docker Hub's implicit default."""
    repository: str
    tag: str | None
    digest: str
    """``sha256:<64 lowercase hex>``: the source digest (the manifest's identity)."""

    @property
    def enroot_registry(self) -> str:
        if self.registry is None or self.registry.lower() in _DOCKER_HUB_ALIASES:
            return DOCKER_HUB
        return self.registry

    @property
    def enroot_repository(self) -> str:
        if self.enroot_registry == DOCKER_HUB and "/" not in self.repository:
            return f"library/{self.repository}"
        return self.repository

    @property
    def enroot_uri(self) -> str:
        """``docker://REGISTRY#PATH[:TAG]@sha256:HEX`` — the form Enroot 4.x reads unambiguously."""
        tag = f":{self.tag}" if self.tag else ""
        return f"docker://{self.enroot_registry}#{self.enroot_repository}{tag}@{self.digest}"

    @property
    def enroot_uri_tag_digest(self) -> str:
        """``docker://REGISTRY#PATH:sha256:HEX`` — the digest in tag position (the tag dropped):
        the only digest-pinned form Enroot 3.x reads. It refuses ``#PATH@sha256:`` and misreads
        ``REGISTRY/PATH@sha256:`` as a user name and the image ``sha256`` (docs/enroot.md,
        "Import")."""
        return f"docker://{self.enroot_registry}#{self.enroot_repository}:{self.digest}"

    def __str__(self) -> str:
        prefix = f"{self.registry}/" if self.registry else ""
        tag = f":{self.tag}" if self.tag else ""
        return f"{prefix}{self.repository}{tag}@{self.digest}"


def _fail(rule: str, value: str) -> InvalidReference:
    return InvalidReference(field=FIELD, rule=rule, value=value)


def _check_characters(text: str) -> None:
    if not text:
        raise _fail("must not be empty", text)
    if len(text) > REFERENCE_MAX:
        raise _fail(f"must be at most {REFERENCE_MAX} characters", text)
    if any(ch.isspace() for ch in text):
        raise _fail("must not contain whitespace", text)
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise _fail("must not contain control characters", text)
    if not text.isascii():
        raise _fail("must be ASCII", text)
    if "://" in text:
        raise _fail("must not carry a scheme such as docker:// or https://", text)
    if "?" in text:
        raise _fail("must not carry a query (?)", text)
    if "#" in text:
        raise _fail("must not carry a fragment (#)", text)
    bad = sorted(
        set(text) - set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:/@[]")
    )
    if bad:
        raise _fail(f"must not contain {''.join(bad)!r}", text)


def _check_registry(host_port: str, value: str) -> None:
    host, port = host_port, None
    if host_port.startswith("["):
        end = host_port.find("]")
        if end < 0:
            raise _fail("registry has an unclosed IPv6 bracket", value)
        host, rest = host_port[1:end], host_port[end + 1 :]
        if not _IPV6_CHARACTERS.fullmatch(host):
            raise _fail(
                "registry IPv6 address in brackets must hold hexadecimal digits and colons only",
                value,
            )
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _fail("registry IPv6 address is not valid", value) from None
        if rest:
            if not rest.startswith(":"):
                raise _fail("registry must be host[:port]", value)
            port = rest[1:]
    else:
        if host_port.count(":") > 1:
            raise _fail("registry must be host[:port]", value)
        if ":" in host_port:
            host, port = host_port.split(":", 1)
        if not _DOMAIN_NAME.fullmatch(host):
            raise _fail("registry host must be a domain name or an IP address", value)
    if port is not None and not (_PORT.fullmatch(port) and int(port) <= 65535):
        raise _fail("registry port must be a number from 1 to 65535", value)


def parse_reference(text: str) -> OciReference:
    """Parse and validate a digest-pinned OCI reference.

    Raises ``InvalidReference`` naming the rule that ``text`` breaks.
    """
    _check_characters(text)
    if "@" not in text:
        raise _fail("a digest (@sha256:<64 lowercase hex>) is required", text)
    name_and_tag, digest = text.rsplit("@", 1)
    if "@" in name_and_tag or "/" in digest:
        raise _fail("must not carry credentials (user@ or user:pass@)", text)
    if not digest.startswith("sha256:"):
        raise _fail("the digest must be sha256:<64 lowercase hex>", text)
    if not _DIGEST.fullmatch(digest):
        raise _fail("the digest must be sha256: followed by 64 lowercase hex characters", text)

    slash = name_and_tag.rfind("/")
    colon = name_and_tag.rfind(":")
    tag: str | None = None
    name = name_and_tag
    if colon > slash:
        name, tag = name_and_tag[:colon], name_and_tag[colon + 1 :]
        if not _TAG.fullmatch(tag):
            raise _fail("the tag must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", text)
    if not name:
        raise _fail("the repository name must not be empty", text)

    components = name.split("/")
    registry: str | None = None
    first = components[0]
    if len(components) > 1 and ("." in first or ":" in first or first == "localhost"):
        registry = first
        _check_registry(registry, text)
        components = components[1:]
    elif "[" in name or "]" in name:
        raise _fail("brackets are allowed only around an IPv6 registry address", text)
    for component in components:
        if not component:
            raise _fail("the repository path must not have empty components", text)
        if component != component.lower():
            raise _fail("the repository path must be lowercase", text)
        if not _PATH_COMPONENT.fullmatch(component):
            raise _fail(
                "each path component must be lowercase alphanumerics"
                " joined by '.', '_', '__' or '-'",
                text,
            )
    reference = OciReference(
        registry=registry, repository="/".join(components), tag=tag, digest=digest
    )
    if len(reference.enroot_repository) > PATH_MAX:
        raise _fail(
            f"the repository path after the registry host must be at most {PATH_MAX} characters"
            " (Docker Hub's library/ included)",
            text,
        )
    return reference
