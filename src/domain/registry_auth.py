"""How a registry asks for credentials, read as untrusted text (docs/design.md, "Registry
authentication"): its ``WWW-Authenticate`` challenges, a token service's answer, and a
``Retry-After``. Pure functions: the ``Registry`` adapter does the asking.

A challenge is RFC 7235's ``scheme param=value, param="quoted value", ...``; several may share
one header (``Basic realm="r", Bearer realm="https://..."``). The Bearer scheme is the token
flow of the distribution specification (Docker Hub, GHCR, quay.io, NGC): a ``realm`` URL to
ask for a token, with ``service`` and ``scope`` as query parameters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from slurm_image.domain.errors import InvalidRegistryAnswer
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json

CHALLENGE_MAX = 8192
"""A ``WWW-Authenticate`` header longer than this is refused, not parsed."""
TOKEN_ANSWER_MAX_BYTES = 1024 * 1024
TOKEN_MAX = 64 * 1024
DEFAULT_TOKEN_LIFETIME_S = 60
"""The distribution token specification: a token answer without ``expires_in`` lasts 60 s."""
TOKEN_LIFETIME_MAX_S = 24 * 3600

_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_VISIBLE = re.compile(r"[\x21-\x7e]+")


@dataclass(frozen=True)
class Challenge:
    """One challenge: its scheme, lowercased (``basic``, ``bearer``), and its parameters (names
    lowercased, values as sent)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")


def _refuse(field_name: str, rule: str) -> InvalidRegistryAnswer:
    return InvalidRegistryAnswer(field=field_name, rule=rule)


class _Reader:
    """A cursor over the header's text."""

    def __init__(self, text: str) -> None:
        self.text, self.at = text, 0

    def skip(self, characters: str = " \t") -> None:
        while self.at < len(self.text) and self.text[self.at] in characters:
            self.at += 1

    def done(self) -> bool:
        return self.at >= len(self.text)

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def token(self) -> str | None:
        match = _TOKEN.match(self.text, self.at)
        if not match:
            return None
        self.at = match.end()
        return match.group()

    def quoted(self, field_name: str) -> str:
        self.at += 1  # the opening quote
        value: list[str] = []
        while self.at < len(self.text):
            character = self.text[self.at]
            self.at += 1
            if character == "\\" and self.at < len(self.text):
                value.append(self.text[self.at])
                self.at += 1
            elif character == '"':
                return "".join(value)
            else:
                value.append(character)
        raise _refuse(field_name, "the WWW-Authenticate header has an unclosed quoted string")


def parse_challenges(header: str, *, field: str = "WWW-Authenticate") -> list[Challenge]:
    """The challenges of one ``WWW-Authenticate`` header. Raises ``InvalidRegistryAnswer`` for
    a header that is too long, holds control characters or does not follow the grammar."""
    if len(header) > CHALLENGE_MAX:
        raise _refuse(field, f"the WWW-Authenticate header is longer than {CHALLENGE_MAX}")
    if any((ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F for ch in header):
        raise _refuse(field, "the WWW-Authenticate header holds control characters")
    reader = _Reader(header)
    challenges: list[Challenge] = []
    while True:
        reader.skip(" \t,")
        if reader.done():
            return challenges
        scheme = reader.token()
        if scheme is None:
            raise _refuse(field, "the WWW-Authenticate header does not start with a scheme")
        params: dict[str, str] = {}
        challenges.append(Challenge(scheme.lower(), params))
        reader.skip()
        # the token68 form (``Basic dXNlcg==``): one value, then the end or the next challenge
        token68 = _TOKEN68.match(reader.text, reader.at)
        if token68:
            after = _Reader(reader.text)
            after.at = token68.end()
            after.skip()
            if after.done() or after.peek() == ",":
                reader.at = after.at
                continue
        while not reader.done():
            start = reader.at
            reader.skip(" \t,")
            name = reader.token()
            if name is None:
                break
            reader.skip()
            if reader.peek() != "=":  # the next challenge's scheme
                reader.at = start
                break
            reader.at += 1
            reader.skip()
            if reader.peek() == '"':
                value = reader.quoted(field)
            else:
                bare = reader.token()
                if bare is None:
                    raise _refuse(field, f"the WWW-Authenticate parameter {name} has no value")
                value = bare
            params[name.lower()] = value
            reader.skip()
            if not reader.done() and reader.peek() != ",":
                raise _refuse(field, "the WWW-Authenticate parameters are not comma-separated")


def preferred_challenge(challenges: list[Challenge]) -> Challenge | None:
    """The challenge to answer: Bearer over Basic (a token never carries the password on
    every request), None when the registry offers neither."""
    for scheme in ("bearer", "basic"):
        for challenge in challenges:
            if challenge.scheme == scheme:
                return challenge
    return None


@dataclass(frozen=True)
class TokenAnswer:
    """A token service's answer: the token (never printed) and how long it lasts."""

    token: str = field(repr=False)
    lifetime_s: int


def read_token_answer(data: bytes, *, field: str) -> TokenAnswer:
    """The token of a token service's JSON answer (``token``, else ``access_token``) and its
    ``expires_in`` (default 60 s, at most a day). Raises ``InvalidRegistryAnswer`` for an
    answer that is not such an object, or a token that could not travel in a header."""
    if len(data) > TOKEN_ANSWER_MAX_BYTES:
        raise _refuse(field, f"the token answer is larger than {TOKEN_ANSWER_MAX_BYTES} bytes")
    try:
        body = load_untrusted_json(data)
    except UnreadableJson as error:
        raise _refuse(field, f"the token answer {error.reason}") from None
    if not isinstance(body, dict):
        raise _refuse(field, "the token answer is not a JSON object")
    token = body.get("token") or body.get("access_token")
    if not isinstance(token, str) or not token:
        raise _refuse(field, "the token answer holds no token")
    if len(token) > TOKEN_MAX or not _VISIBLE.fullmatch(token):
        raise _refuse(field, "the token answer's token is not a header value of visible ASCII")
    expires = body.get("expires_in", DEFAULT_TOKEN_LIFETIME_S)
    if type(expires) is not int or expires <= 0:
        expires = DEFAULT_TOKEN_LIFETIME_S
    return TokenAnswer(token=token, lifetime_s=min(expires, TOKEN_LIFETIME_MAX_S))


def retry_after_s(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for, in seconds (delay-seconds or an HTTP date;
    None when absent or unreadable, never negative)."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit() and text.isascii():
        return float(min(int(text), 10**9))
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max(0.0, (moment - current).total_seconds())
