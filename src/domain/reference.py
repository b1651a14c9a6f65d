"""OCI image references: the distribution grammar, our rules, and Enroot's URI form.

One grammar, two forms: ``parse_reference`` reads the digest-pinned reference an import takes,
``parse_tag_reference`` the reference by tag that ``resolve`` pins (the same rules, the digest
refused and the tag required).
"""

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
        return _enroot_registry(self.registry)

    @property
    def enroot_repository(self) -> str:
        return _enroot_repository(self.registry, self.repository)

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


class TagReference(BaseModel):
    """A reference by tag, ``registry/repo:TAG``: what ``resolve`` turns into an
    ``OciReference`` pinned by the digest the registry answers for the tag now."""

    model_config = FROZEN

    registry: str | None
    """The registry host[:port] as written, or None for Docker Hub's implicit default."""
    repository: str
    tag: str

    @property
    def enroot_registry(self) -> str:
        """The host the registry API is asked (and netrc entries are matched) at: Docker Hub's
        names become ``registry-1.docker.io``, as for Enroot."""
        return _enroot_registry(self.registry)

    @property
    def enroot_repository(self) -> str:
        """The repository path the registry API is asked for (``library/`` added for Docker
        Hub's one-component names)."""
        return _enroot_repository(self.registry, self.repository)

    def pinned(self, digest: str) -> OciReference:
        """This reference pinned by ``digest``: exactly what a user typing it would import."""
        return parse_reference(f"{self}@{digest}")

    def __str__(self) -> str:
        prefix = f"{self.registry}/" if self.registry else ""
        return f"{prefix}{self.repository}:{self.tag}"


def _enroot_registry(registry: str | None) -> str:
    if registry is None or registry.lower() in _DOCKER_HUB_ALIASES:
        return DOCKER_HUB
    return registry


def _enroot_repository(registry: str | None, repository: str) -> str:
    if _enroot_registry(registry) == DOCKER_HUB and "/" not in repository:
        return f"library/{repository}"
    return repository


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


class RegistryPrefix(BaseModel):
    """A registry and an optional repository path prefix, ``host[:port][/path...]``: what a
    site's ``[policy] allowed_registries`` lists. It covers a reference whose registry (as the
    registry API is asked: Docker Hub's names become one) is the same, the host compared without
    regard to case, and whose repository path starts with the prefix's whole components."""

    model_config = FROZEN

    registry: str
    """host[:port] as the registry API is asked (``enroot_registry``), the host lowercased."""
    path: tuple[str, ...] = ()

    def covers(self, reference: OciReference | TagReference) -> bool:
        components = tuple(reference.enroot_repository.split("/"))
        return self._covers(_lower_host(reference.enroot_registry), components)

    def within(self, other: RegistryPrefix) -> bool:
        """Whether ``other`` covers everything this prefix covers: the same registry, and this
        path starts with ``other``'s whole components."""
        return other._covers(self.registry, self.path)

    def _covers(self, registry: str, components: tuple[str, ...]) -> bool:
        return registry == self.registry and components[: len(self.path)] == self.path

    def __str__(self) -> str:
        return "/".join((self.registry, *self.path))


def _lower_host(host_port: str) -> str:
    if host_port.startswith("["):
        return host_port
    host, colon, port = host_port.partition(":")
    return host.lower() + colon + port


def parse_registry_prefix(text: str) -> RegistryPrefix:
    """Parse ``host[:port][/path...]`` by the reference grammar (no scheme, tag or digest; the
    host is required even for Docker Hub, e.g. ``docker.io/library``).

    Raises ``InvalidReference`` naming the rule that ``text`` breaks.
    """
    _check_characters(text)
    if "@" in text:
        raise _fail("a registry prefix names no digest and no credentials", text)
    registry, slash, path = text.partition("/")
    _check_registry(registry, text)
    components = tuple(path.split("/")) if slash else ()
    for component in components:
        if not _PATH_COMPONENT.fullmatch(component):
            raise _fail(
                "each path component must be lowercase alphanumerics"
                " joined by '.', '_', '__' or '-' (and none empty)",
                text,
            )
    return RegistryPrefix(registry=_lower_host(_enroot_registry(registry)), path=components)


def parse_reference(text: str) -> OciReference:
    """Parse and validate a digest-pinned OCI reference.

    Raises ``InvalidReference`` naming the rule that ``text`` breaks.
    """
    _check_characters(text)
    if "@" not in text:
        raise _fail(
            "a digest (@sha256:<64 lowercase hex>) is required (a tag alone is pinned by"
            " import --resolve, or printed by slurm-image resolve)",
            text,
        )
    name_and_tag, digest = text.rsplit("@", 1)
    if "@" in name_and_tag or "/" in digest:
        raise _fail("must not carry credentials (user@ or user:pass@)", text)
    if not digest.startswith("sha256:"):
        raise _fail("the digest must be sha256:<64 lowercase hex>", text)
    if not _DIGEST.fullmatch(digest):
        raise _fail("the digest must be sha256: followed by 64 lowercase hex characters", text)
    registry, repository, tag = _parse_name(name_and_tag, text)
    return OciReference(registry=registry, repository=repository, tag=tag, digest=digest)


def parse_tag_reference(text: str) -> TagReference:
    """Parse and validate a reference by tag, ``registry/repo:TAG``, to be resolved to a digest:
    the grammar of ``parse_reference`` without the digest, and the tag required.

    Raises ``InvalidReference`` naming the rule that ``text`` breaks.
    """
    _check_characters(text)
    if "@" in text:
        name, _, after = text.rpartition("@")
        if "@" in name or "/" in after or not after.startswith("sha256:"):
            raise _fail("must not carry credentials (user@ or user:pass@)", text)
        raise _fail(
            "a reference to resolve names a tag and no digest (it is resolved to one):"
            " drop the @sha256:... part, or import the pinned reference as it is",
            text,
        )
    registry, repository, tag = _parse_name(text, text)
    if tag is None:
        raise _fail(
            "a tag is required to resolve (registry/repo:TAG, e.g. ubuntu:24.04); Docker's"
            " implicit :latest is not assumed",
            text,
        )
    return TagReference(registry=registry, repository=repository, tag=tag)


def _parse_name(name_and_tag: str, text: str) -> tuple[str | None, str, str | None]:
    """The registry (None: Docker Hub's implicit default), repository path and tag of
    ``name_and_tag``, by the distribution grammar; ``text`` is what the errors quote."""
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
    repository = "/".join(components)
    if len(_enroot_repository(registry, repository)) > PATH_MAX:
        raise _fail(
            f"the repository path after the registry host must be at most {PATH_MAX} characters"
            " (Docker Hub's library/ included)",
            text,
        )
    return registry, repository, tag


def registry_named(text: str) -> str | None:
    """The registry host ``text`` asks, pinned or by tag, in lowercase as the resolver asks it
    (Docker Hub's names as ``registry-1.docker.io``); None for text that is no reference
    (whoever parses it next refuses it)."""
    for parse in (parse_reference, parse_tag_reference):
        try:
            return parse(text).enroot_registry.lower()
        except InvalidReference:
            continue
    return None
