"""The Registry port over HTTPS with httpx (``ports.registry``; docs/design.md, "Registry
authentication").

One ``fetch_manifest`` is one ``GET /v2/<repository>/manifests/<reference>``, authenticated the
way the registry's ``WWW-Authenticate`` challenge asks:

- anonymously first; on a 401 from the registry's own origin, Basic with the request's netrc
  entry (over HTTPS only), or a Bearer token from the challenge's realm (an https URL; the
  entry's login goes there only when the challenge itself came over HTTPS). The token is asked
  for ``repository:<repository>:pull`` (never a wider scope the registry might name) and kept
  in this object's memory for its ``expires_in``, for that registry's origin only: another
  registry naming the same realm never gets it;
- redirects are followed here, at most five: the ``Authorization`` header goes only to the
  origin it was made for (the registry, or the token realm), never along a redirect to another
  scheme, host or port; a redirect to plain HTTP is refused unless ``allow_http``;
- a registry that does not speak TLS on its port (the handshake fails, but not on its
  certificate) is asked again over plain HTTP when ``allow_http`` is set, anonymously only;
- bodies are read raw (``Accept-Encoding: identity``; an encoded one is refused) and stop at
  the bound, whatever ``Content-Length`` says, or at the deadline; an error answer is read to
  64 KiB at most; a redirect to a URL holding credentials is refused;
- transient failures (connection errors, timeouts, 408, 429, 500, 502, 503, 504) are retried
  with tenacity within the request's ``timeout_s``, exponentially from 0.5 s, and a 429's
  ``Retry-After`` is waited for when it is at most ``retry_after_max_s``; a certificate that
  does not verify is not retried;
- the whole conversation (connecting, TLS, headers and body of every try, retry, redirect and
  token request) ends by the request's deadline, ``timeout_s`` after it began: each read is
  given at most the time left, and a watchdog shuts the conversation's connections down when
  the deadline passes. httpx's timeouts bound one read each, so without it a registry sending
  a byte of its headers or body every few seconds would hold the command for as long as it
  liked. Only the system resolver's own timeouts bound a name lookup.

TLS trusts the system store, as Enroot's curl does: ``ssl.create_default_context()``, through
which OpenSSL reads ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` when set; proxies come from the
environment (``https_proxy``, ``no_proxy``) as they do for curl.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import tenacity

from slurm_image.adapters.deadline import Watchdog
from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.errors import InvalidRegistryAnswer
from slurm_image.domain.registry_auth import (
    TOKEN_ANSWER_MAX_BYTES,
    Challenge,
    parse_challenges,
    preferred_challenge,
    read_token_answer,
    retry_after_s,
)
from slurm_image.domain.registry_text import registry_text
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json
from slurm_image.ports.registry import (
    AnswerRefused,
    AnswerTooLarge,
    ManifestAnswer,
    ManifestRequest,
    RegistryAuthFailed,
    RegistryNotFound,
    RegistryRejected,
    RegistryUnavailable,
)

log = logging.getLogger(__name__)

ATTEMPTS = 5
RETRY_AFTER_MAX_S = 30.0
REDIRECTS_MAX = 5
ERROR_BODY_MAX = 64 * 1024
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "slurm-image"
_CHUNK = 64 * 1024
_TOKEN_MARGIN_S = 5.0


@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int | None

    @classmethod
    def of(cls, url: httpx.URL) -> _Origin:
        default = {"https": 443, "http": 80}.get(url.scheme)
        return cls(url.scheme, url.host.lower(), url.port or default)


@dataclass(frozen=True)
class _TokenKey:
    """What a cached token was issued for: the registry's origin it is sent to, and what its
    realm was asked (the realm, service, scope and the login it was given)."""

    origin: _Origin
    realm: str
    service: str
    scope: str
    login: str | None


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes
    url: httpx.URL


@dataclass
class _Token:
    value: str = field(repr=False)
    expires_at: float
    with_credentials: bool
    """Whether the realm was given the netrc entry for it."""


class _Transient(Exception):
    """One try failed in a way a later one may not; never leaves this module."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        self.reason = reason
        self.retry_after = retry_after
        super().__init__(reason)


class _NoTls(Exception):
    """The server does not speak TLS on that port (a plain-HTTP registry)."""


def _ssl_failure(error: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class HttpRegistry:
    """Fetches manifests over HTTP(S) (see the module docstring). ``sleep`` and ``monotonic``
    are injectable so that tests wait for nothing; ``transport`` replaces httpx's network one.
    """

    def __init__(
        self,
        *,
        attempts: int = ATTEMPTS,
        retry_after_max_s: float = RETRY_AFTER_MAX_S,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._attempts = attempts
        self._retry_after_max_s = retry_after_max_s
        self._sleep = sleep
        self._monotonic = monotonic
        self._transport = transport
        self._tokens: dict[_TokenKey, _Token] = {}
        self._realms: dict[tuple[_Origin, str, str | None], _TokenKey] = {}
        self._context: ssl.SSLContext | None = None

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context()
        return self._context

    def fetch_manifest(self, request: ManifestRequest) -> ManifestAnswer:
        watchdog = Watchdog(request.timeout_s)
        try:
            with self._client() as client:
                return _Call(self, client, request, watchdog).manifest()
        finally:
            watchdog.cancel()

    @contextmanager
    def _client(self) -> Iterator[httpx.Client]:
        with httpx.Client(
            verify=self._ssl(),
            trust_env=True,
            follow_redirects=False,
            transport=self._transport,
            headers={"User-Agent": USER_AGENT},
        ) as client:
            yield client


class _Call:
    """One ``fetch_manifest``: its deadline (and the watchdog keeping it), the origin the
    registry answers on, and the credentials of the request."""

    def __init__(
        self,
        owner: HttpRegistry,
        client: httpx.Client,
        request: ManifestRequest,
        watchdog: Watchdog,
    ):
        self.owner = owner
        self.client = client
        self.request = request
        self.deadline = owner._monotonic() + request.timeout_s
        self.watchdog = watchdog
        self.registry = request.registry
        self.scheme = "https"
        self.login = request.credentials.login if request.credentials else None
        self.token_with_credentials = False
        self.secrets: set[str] = set(request.credentials.secrets() if request.credentials else ())
        """Every credential this conversation may send, dropped from any text it quotes."""

    # -- the manifest --------------------------------------------------------------------

    def manifest(self) -> ManifestAnswer:
        request = self.request
        log.info("asking %s for %s:%s", self.registry, request.repository, request.reference)
        try:
            reply, authorization = self._first_try()
        except _NoTls:
            if not request.allow_http:
                raise RegistryUnavailable(
                    field=self.registry,
                    rule="does not speak TLS on its port; a plain-HTTP registry is asked only"
                    " when [enroot] environment sets ENROOT_ALLOW_HTTP, as for the import job",
                ) from None
            log.info("%s does not speak TLS: asking it over plain HTTP, anonymously", self.registry)
            self.scheme = "http"
            reply, authorization = self._get(self._manifest_url(), None), None
        if reply.status == 401:
            authorization = self._answer(reply)
            reply = self._get(self._manifest_url(), authorization)
            if reply.status == 401:
                self._require_own_origin(reply)
                raise self._refused(authorization)
        return self._result(reply)

    def _first_try(self) -> tuple[_Reply, str | None]:
        """The first request: with a token still valid from an earlier challenge of this
        registry and repository, else anonymous; a refused token is dropped."""
        key = self.owner._realms.get((self._origin, self.request.repository, self.login))
        token = self.owner._tokens.get(key) if key is not None else None
        if key is None or token is None or token.expires_at <= self.owner._monotonic():
            return self._get(self._manifest_url(), None), None
        self.secrets.add(token.value)
        authorization = f"Bearer {token.value}"
        reply = self._get(self._manifest_url(), authorization)
        if reply.status == 401:
            del self.owner._tokens[key]  # refused: the challenge decides again
            return reply, None
        return reply, authorization

    def _quote(self, text: object) -> str:
        """Text the registry (or a host it sent us to) chose, as an error may quote it."""
        return registry_text(text, self.secrets)

    def _host(self, url: httpx.URL) -> str:
        return self._quote(url.host)

    def _error_code(self, reply: _Reply) -> str:
        """`` CODE: message`` of a distribution error answer, quoted (``_quote``)."""
        try:
            errors = load_untrusted_json(reply.body).get("errors")
            first = errors[0] if isinstance(errors, list) and errors else {}
            code, message = str(first.get("code", "")), str(first.get("message", ""))
        except (UnreadableJson, AttributeError):
            return ""
        text = self._quote(": ".join(part for part in (code, message) if part))
        return f" {text}" if text else ""

    def _left(self) -> float:
        """The seconds left before the deadline (none once the watchdog has fired)."""
        if self.watchdog.expired:
            return 0.0
        return self.deadline - self.owner._monotonic()

    def _late(self, url: httpx.URL) -> _Transient:
        return _Transient(f"{self._host(url)} did not answer in time")

    @property
    def _origin(self) -> _Origin:
        return _Origin.of(self._manifest_url())

    @property
    def _origin_text(self) -> str:
        return f"{self.scheme}://{self.registry}"

    def _manifest_url(self) -> httpx.URL:
        request = self.request
        return httpx.URL(
            f"{self._origin_text}/v2/{request.repository}/{request.kind}/{request.reference}"
        )

    def _result(self, reply: _Reply) -> ManifestAnswer:
        what = f"{self.request.repository}:{self.request.reference}"
        if reply.status == 200:
            return ManifestAnswer(
                data=reply.body,
                content_type=reply.headers.get("content-type"),
                content_digest=reply.headers.get("docker-content-digest"),
            )
        if reply.status == 404:
            raise RegistryNotFound(
                field=self.registry, rule=f"has no {what} (answered 404{self._error_code(reply)})"
            )
        if reply.status == 403:
            raise RegistryAuthFailed(
                field=self.registry,
                rule=f"denies access to {what} (403{self._error_code(reply)})"
                + self._with_entry(self.request.credentials),
            )
        raise RegistryRejected(
            field=self.registry, rule=f"answered {reply.status}{self._error_code(reply)} for {what}"
        )

    # -- authentication ------------------------------------------------------------------

    def _answer(self, reply: _Reply) -> str:
        """The ``Authorization`` to send after the registry's 401 ``reply``."""
        self._require_own_origin(reply)
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
            raise self._no_credentials("Basic")
        if self.scheme != "https":
            raise RegistryAuthFailed(
                field=self.registry,
                rule="asks for credentials over plain HTTP: they are sent over HTTPS only",
            )
        return credentials.basic()

    def _require_own_origin(self, reply: _Reply) -> None:
        """A 401 from another origin than the registry's (a redirect led there) is never
        answered: no credentials go to another host."""
        if _Origin.of(reply.url) != _Origin.of(self._manifest_url()):
            raise RegistryAuthFailed(
                field=self.registry,
                rule=f"a redirect led to {self._host(reply.url)}, which asks for credentials:"
                " none are sent to another host than the registry's",
            )

    def _token(self, challenge: Challenge) -> str:
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
                rule=f"its Bearer realm {self._host(realm)} is plain HTTP; tokens are asked for"
                " over HTTPS (or with ENROOT_ALLOW_HTTP, anonymously)",
            )
        # The login goes to the realm the registry named only when both are HTTPS: a challenge
        # that came over plain HTTP could name anyone's realm.
        credentials = self.request.credentials
        sendable = credentials if realm.scheme == "https" and self.scheme == "https" else None
        service = challenge.params.get("service", "")
        scope = f"repository:{self.request.repository}:pull"
        # A token goes only to the registry it was issued for: another registry whose challenge
        # names the same realm, service and repository gets a token of its own.
        key = _TokenKey(self._origin, str(realm.copy_with(query=None)), service, scope, self.login)
        cached = self.owner._tokens.get(key)
        now = self.owner._monotonic()
        if cached is not None and cached.expires_at > now:
            self.token_with_credentials = cached.with_credentials
            self.secrets.add(cached.value)
            return cached.value
        params = {"scope": scope, **({"service": service} if service else {})}
        url = realm.copy_merge_params(params)
        reply = self._get(
            url, sendable.basic() if sendable else None, max_bytes=TOKEN_ANSWER_MAX_BYTES
        )
        if reply.status in (401, 403):
            if sendable is not None:
                raise RegistryAuthFailed(
                    field=self.registry,
                    rule=f"its token service {self._host(realm)} refuses the credentials of the"
                    f" netrc entry '{sendable.describe()}'",
                )
            raise self._no_credentials("Bearer", realm=self._host(realm))
        if reply.status != 200:
            raise RegistryRejected(
                field=self.registry,
                rule=f"its token service {self._host(realm)} answered"
                f" {reply.status}{self._error_code(reply)}",
            )
        try:
            answer = read_token_answer(reply.body, field=self.registry)
        except InvalidRegistryAnswer as error:
            raise AnswerRefused(
                field=self.registry, rule=f"{self._host(realm)}: {error.rule}"
            ) from None
        self.secrets.add(answer.token)
        lifetime = answer.lifetime_s
        margin = min(_TOKEN_MARGIN_S, lifetime / 10)
        self.token_with_credentials = sendable is not None
        self.owner._tokens[key] = _Token(
            answer.token, now + lifetime - margin, sendable is not None
        )
        self.owner._realms[(self._origin, self.request.repository, self.login)] = key
        log.info(
            "%s: a token from %s for %s, for %d s",
            self.registry,
            self._host(realm),
            scope,
            lifetime,
        )
        return answer.token

    def _no_credentials(self, scheme: str, realm: str | None = None) -> RegistryAuthFailed:
        via = f" (token service {realm})" if realm else ""
        return RegistryAuthFailed(
            field=self.registry,
            rule=f"asks for credentials ({scheme}{via}) for {self.request.repository}, and none"
            f" were given for {self.registry}",
        )

    def _refused(self, authorization: str) -> RegistryAuthFailed:
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
        return self._no_credentials("Bearer")

    @staticmethod
    def _with_entry(credentials: RegistryCredentials | None) -> str:
        if credentials is None:
            return " (no credentials were sent)"
        return f" (with the netrc entry '{credentials.describe()}')"

    # -- one GET, its redirects and its retries ------------------------------------------

    def _get(
        self,
        url: httpx.URL,
        authorization: str | None,
        *,
        max_bytes: int | None = None,
    ) -> _Reply:
        """GET ``url`` (following redirects, ``authorization`` sent to ``url``'s origin only),
        retrying transient failures until the deadline."""
        bound = self.request.max_bytes if max_bytes is None else max_bytes
        owner = self.owner

        def stop(state: tenacity.RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome else None
            if (
                isinstance(error, _Transient)
                and error.retry_after is not None
                and error.retry_after > owner._retry_after_max_s
            ):
                return True
            remaining = self._left()
            return state.attempt_number >= owner._attempts or state.upcoming_sleep >= remaining

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            if isinstance(error, _Transient) and error.retry_after is not None:
                return error.retry_after
            return float(min(0.5 * 2 ** (state.attempt_number - 1), 8.0))

        def warn(state: tenacity.RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.warning(
                "%s: try %d failed (%s); retrying in %.1f s",
                self.registry,
                state.attempt_number,
                error,
                state.upcoming_sleep,
            )

        retrying = tenacity.Retrying(
            stop=stop,
            wait=wait,
            retry=tenacity.retry_if_exception_type(_Transient),
            sleep=owner._sleep,
            before_sleep=warn,
            reraise=True,
        )
        try:
            return retrying(self._follow, url, authorization, bound)
        except _Transient as last:
            if last.retry_after is not None and last.retry_after > owner._retry_after_max_s:
                rule = (
                    f"{last.reason} and asks to retry after {last.retry_after:.0f} s, more than"
                    f" the {owner._retry_after_max_s:.0f} s waited at most"
                )
            else:
                rule = f"{last.reason} (within {self.request.timeout_s:.3g} s, retries included)"
            where = self.registry if _Origin.of(url) == self._origin else self._host(url)
            raise RegistryUnavailable(field=where, rule=rule) from None

    def _follow(self, url: httpx.URL, authorization: str | None, bound: int) -> _Reply:
        credential_origin = _Origin.of(url)
        current = url
        for _ in range(REDIRECTS_MAX + 1):
            headers = {
                "Accept": self.request.accept,
                "Accept-Encoding": "identity",
            }
            if authorization is not None and _Origin.of(current) == credential_origin:
                headers["Authorization"] = authorization
            reply = self._exchange(current, headers, bound)
            location = reply.headers.get("location")
            if reply.status not in REDIRECT_STATUSES or location is None:
                return reply
            try:
                target = current.join(location)
            except (httpx.InvalidURL, ValueError):
                raise AnswerRefused(
                    field=self.registry, rule="redirected to something that is not a URL"
                ) from None
            if target.scheme not in ("https", "http") or not target.host:
                raise AnswerRefused(
                    field=self.registry,
                    rule=f"redirected to a {self._quote(target.scheme) or 'relative'} URL",
                )
            if target.userinfo:
                raise AnswerRefused(
                    field=self.registry,
                    rule=f"redirected to a URL with credentials in it ({self._host(target)})",
                )
            if target.scheme == "http" and not self.request.allow_http:
                raise AnswerRefused(
                    field=self.registry,
                    rule=f"redirected to plain HTTP ({self._host(target)}), which is not allowed",
                )
            if _Origin.of(target) != credential_origin and "Authorization" in headers:
                log.info(
                    "%s: redirected to %s, without credentials", self.registry, self._host(target)
                )
            current = target
        raise AnswerRefused(field=self.registry, rule=f"redirected more than {REDIRECTS_MAX} times")

    def _exchange(self, url: httpx.URL, headers: dict[str, str], bound: int) -> _Reply:
        remaining = self._left()
        if remaining <= 0:
            raise self._late(url)
        try:
            with self.client.stream(
                "GET",
                url,
                headers=headers,
                timeout=httpx.Timeout(remaining),
                extensions={"trace": self.watchdog.trace},
            ) as response:
                status = response.status_code
                if status in TRANSIENT_STATUSES:
                    wait = (
                        retry_after_s(response.headers.get("retry-after"))
                        if status == 429
                        else None
                    )
                    raise _Transient(f"{self._host(url)} answered {status}", retry_after=wait)
                if status in REDIRECT_STATUSES:
                    return _Reply(status, response.headers, b"", url)
                limit = bound if status == 200 else ERROR_BODY_MAX
                body = self._read(response, limit, refuse=status == 200)
                return _Reply(status, response.headers, body, url)
        except httpx.TimeoutException:
            raise self._late(url) from None
        except httpx.ConnectError as error:
            if self.watchdog.expired:
                raise self._late(url) from None
            failure = _ssl_failure(error)
            if failure is None:
                raise _Transient(f"cannot connect to {self._host(url)}:{url.port or ''}") from None
            if isinstance(failure, ssl.SSLCertVerificationError):
                raise RegistryUnavailable(
                    field=self.registry,
                    rule=f"{self._host(url)}'s certificate does not verify"
                    f" ({failure.verify_message}); TLS trusts the system store (SSL_CERT_FILE,"
                    " SSL_CERT_DIR)",
                ) from None
            if _Origin.of(url) == _Origin.of(self._manifest_url()) and url.scheme == "https":
                raise _NoTls from None
            raise _Transient(f"TLS with {self._host(url)} failed ({failure.reason})") from None
        except httpx.TransportError as error:
            if self.watchdog.expired:
                raise self._late(url) from None
            raise _Transient(f"{self._host(url)}: {type(error).__name__}") from None

    def _read(self, response: httpx.Response, limit: int, *, refuse: bool) -> bytes:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise AnswerRefused(
                field=self.registry,
                rule=f"sent its answer {self._quote(encoding)}-encoded; only identity was asked"
                " for",
            )
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_raw(_CHUNK):
            if self._left() <= 0:
                raise self._late(response.url)
            size += len(chunk)
            if size > limit:
                if refuse:
                    raise AnswerTooLarge(
                        field=self.registry,
                        rule=f"sent more than {limit} bytes for"
                        f" {self.request.repository}:{self.request.reference}: refused",
                    )
                chunks.append(chunk[: limit - (size - len(chunk))])
                break
            chunks.append(chunk)
        return b"".join(chunks)
