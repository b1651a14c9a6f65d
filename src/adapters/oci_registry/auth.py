"""Answering a registry's 401: its ``WWW-Authenticate`` challenge read, Basic with the netrc
entry (over HTTPS only) or the Bearer token dance with the challenge's realm, the tokens kept
per registry origin for their lifetime, and the refusals naming what was sent (the package's
docstring)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import httpx

from slurm_image.adapters.oci_registry.conversation import Conversation, Origin, Reply
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import InvalidRegistryAnswer
from slurm_image.domain.registry_auth import (
    TOKEN_ANSWER_MAX_BYTES,
    Challenge,
    parse_challenges,
    preferred_challenge,
    read_token_answer,
)
from slurm_image.ports.registry import AnswerRefused, RegistryAuthFailed, RegistryRejected

log = logging.getLogger(__name__)

_TOKEN_MARGIN_S = 5.0


@dataclass(frozen=True)
class TokenKey:
    """What a cached token was issued for: the registry's origin it is sent to, and what its
    realm was asked (the realm, service, scope and the login it was given)."""

    origin: Origin
    realm: str
    service: str
    scope: str
    login: str | None


@dataclass
class Token:
    value: str = field(repr=False)
    expires_at: float
    with_credentials: bool
    """Whether the realm was given the netrc entry for it."""


@dataclass
class TokenCache:
    """The tokens one ``HttpRegistry`` holds, and which one a registry origin's repository
    was last given for a login (the key its next first try looks for)."""

    tokens: dict[TokenKey, Token] = field(default_factory=dict)
    realms: dict[tuple[Origin, str, str | None], TokenKey] = field(default_factory=dict)


class Authentication:
    """The credentials of one ``fetch_manifest`` and what they have been used for."""

    def __init__(self, conversation: Conversation, cache: TokenCache) -> None:
        self.conversation = conversation
        self.cache = cache
        self.request = conversation.request
        self.registry = conversation.registry
        self.login = self.request.credentials.login if self.request.credentials else None
        self.token_with_credentials = False
        self._cached_key: TokenKey | None = None
        self._cached_token: Token | None = None

    def cached(self) -> str | None:
        """The ``Authorization`` of a token still valid from an earlier challenge of this
        registry and repository, if one is."""
        cache = self.cache
        key = cache.realms.get((self.conversation.origin, self.request.repository, self.login))
        token = cache.tokens.get(key) if key is not None else None
        if key is None or token is None or token.expires_at <= self.conversation.monotonic():
            return None
        self._cached_key, self._cached_token = key, token
        self.conversation.secrets.add(token.value)
        return f"Bearer {token.value}"

    def drop_cached(self) -> None:
        """The token of ``cached`` was refused: the challenge decides again. Imports in other
        threads share the cache: one may have dropped that token already, or put a new one in
        its place, which stays."""
        key = self._cached_key
        if key is not None and self.cache.tokens.get(key) is self._cached_token:
            self.cache.tokens.pop(key, None)

    def answer(self, reply: Reply) -> str:
        """The ``Authorization`` to send after the registry's 401 ``reply``."""
        self.require_own_origin(reply)
        challenges: list[Challenge] = []
        try:
            for header in reply.headers.get_list("www-authenticate"):
                challenges.extend(parse_challenges(header, field=self.registry))
        except InvalidRegistryAnswer as error:
            raise AnswerRefused(field=self.registry, rule=error.rule) from None
        challenge = preferred_challenge(challenges)
        if challenge is None:
            raise RegistryAuthFailed(
                field=self.registry,
                rule="answered 401 without a Basic or Bearer challenge; nothing to answer it with",
            )
        if challenge.scheme == "bearer":
            return f"Bearer {self._token(challenge)}"
        credentials = self.request.credentials
        if credentials is None:
            raise self.no_credentials("Basic")
        if self.conversation.scheme != "https":
            raise RegistryAuthFailed(
                field=self.registry,
                rule="asks for credentials over plain HTTP: they are sent over HTTPS only",
            )
        return credentials.basic()

    def require_own_origin(self, reply: Reply) -> None:
        """A 401 from another origin than the registry's (a redirect led there) is never
        answered: no credentials go to another host."""
        if Origin.of(reply.url) != self.conversation.origin:
            raise RegistryAuthFailed(
                field=self.registry,
                rule=f"a redirect led to {self.conversation.host(reply.url)}, which asks for"
                " credentials: none are sent to another host than the registry's",
            )

    def _token(self, challenge: Challenge) -> str:
        conversation = self.conversation
        realm_text = challenge.realm
        if not realm_text:
            raise AnswerRefused(field=self.registry, rule="its Bearer challenge names no realm")
        try:
            realm = httpx.URL(realm_text)
        except (httpx.InvalidURL, ValueError):
            raise AnswerRefused(field=self.registry, rule="its Bearer realm is not a URL") from None
        if realm.scheme not in ("https", "http") or not realm.host or realm.userinfo:
            raise AnswerRefused(
                field=self.registry,
                rule="its Bearer realm is not an http(s) URL of a host without credentials",
            )
        if realm.scheme == "http" and not self.request.allow_http:
            raise AnswerRefused(
                field=self.registry,
                rule=f"its Bearer realm {conversation.host(realm)} is plain HTTP; tokens are"
                " asked for over HTTPS (or with ENROOT_ALLOW_HTTP, anonymously)",
            )
        # The login goes to the realm the registry named only when both are HTTPS: a challenge
        # that came over plain HTTP could name anyone's realm.
        credentials = self.request.credentials
        sendable = (
            credentials if realm.scheme == "https" and conversation.scheme == "https" else None
        )
        service = challenge.params.get("service", "")
        scope = f"repository:{self.request.repository}:pull"
        # A token goes only to the registry it was issued for: another registry whose challenge
        # names the same realm, service and repository gets a token of its own.
        origin = conversation.origin
        key = TokenKey(origin, str(realm.copy_with(query=None)), service, scope, self.login)
        cached = self.cache.tokens.get(key)
        now = conversation.monotonic()
        if cached is not None and cached.expires_at > now:
            self.token_with_credentials = cached.with_credentials
            conversation.secrets.add(cached.value)
            return cached.value
        params = {"scope": scope, **({"service": service} if service else {})}
        url = realm.copy_merge_params(params)
        reply = conversation.get(
            url, sendable.basic() if sendable else None, max_bytes=TOKEN_ANSWER_MAX_BYTES
        )
        if reply.status in (401, 403):
            if sendable is not None:
                raise RegistryAuthFailed(
                    field=self.registry,
                    rule=f"its token service {conversation.host(realm)} refuses the credentials"
                    f" of the netrc entry '{sendable.describe()}'",
                )
            raise self.no_credentials("Bearer", realm=conversation.host(realm))
        if reply.status != 200:
            raise RegistryRejected(
                field=self.registry,
                rule=f"its token service {conversation.host(realm)} answered"
                f" {reply.status}{conversation.error_code(reply)}",
            )
        try:
            answer = read_token_answer(reply.body, field=self.registry)
        except InvalidRegistryAnswer as error:
            raise AnswerRefused(
                field=self.registry, rule=f"{conversation.host(realm)}: {error.rule}"
            ) from None
        conversation.secrets.add(answer.token)
        lifetime = answer.lifetime_s
        margin = min(_TOKEN_MARGIN_S, lifetime / 10)
        self.token_with_credentials = sendable is not None
        self.cache.tokens[key] = Token(answer.token, now + lifetime - margin, sendable is not None)
        self.cache.realms[(origin, self.request.repository, self.login)] = key
        log.info(
            "%s: a token from %s for %s, for %d s",
            self.registry,
            conversation.host(realm),
            scope,
            lifetime,
        )
        return answer.token

    def no_credentials(self, scheme: str, realm: str | None = None) -> RegistryAuthFailed:
        via = f" (token service {realm})" if realm else ""
        return RegistryAuthFailed(
            field=self.registry,
            rule=f"asks for credentials ({scheme}{via}) for {self.request.repository}, and none"
            f" were given for {self.registry}",
        )

    def refused(self, authorization: str) -> RegistryAuthFailed:
        """The registry's second 401, after ``authorization`` was sent."""
        credentials = self.request.credentials
        if authorization.startswith("Basic ") and credentials is not None:
            return RegistryAuthFailed(
                field=self.registry,
                rule=f"refuses the credentials of the netrc entry '{credentials.describe()}'",
            )
        if self.token_with_credentials and credentials is not None:
            return RegistryAuthFailed(
                field=self.registry,
                rule=f"refuses the token its realm gave for {self.request.repository} with the"
                f" netrc entry '{credentials.describe()}'",
            )
        return self.no_credentials("Bearer")


def with_entry(credentials: RegistryCredentials | None) -> str:
    """What an access refusal adds about the credentials sent."""
    if credentials is None:
        return " (no credentials were sent)"
    return f" (with the netrc entry '{credentials.describe()}')"
