"""One ``fetch_manifest``'s conversation with a registry and the hosts it names: each GET with
its redirects (followed by hand, the ``Authorization`` kept to its origin), its retries of
transient failures, its body bounds, and the deadline every byte of it keeps (the package's
docstring)."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import tenacity

from slurm_image.adapters.deadline import Watchdog
from slurm_image.domain.registry_auth import retry_after_s
from slurm_image.domain.registry_text import registry_text
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json
from slurm_image.ports.registry import (
    AnswerRefused,
    AnswerTooLarge,
    ManifestRequest,
    RegistryUnavailable,
)

log = logging.getLogger(__name__)

ATTEMPTS = 5
RETRY_AFTER_MAX_S = 30.0
REDIRECTS_MAX = 5
ERROR_BODY_MAX = 64 * 1024
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int | None

    @classmethod
    def of(cls, url: httpx.URL) -> Origin:
        default = {"https": 443, "http": 80}.get(url.scheme)
        return cls(url.scheme, url.host.lower(), url.port or default)


@dataclass(frozen=True)
class Reply:
    status: int
    headers: httpx.Headers
    body: bytes
    url: httpx.URL


class Transient(Exception):
    """One try failed in a way a later one may not; never leaves this package."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        self.reason = reason
        self.retry_after = retry_after
        super().__init__(reason)


class NoTls(Exception):
    """The server does not speak TLS on that port (a plain-HTTP registry)."""


def _ssl_failure(error: BaseException) -> ssl.SSLError | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class Conversation:
    """One ``fetch_manifest``: its deadline (and the watchdog keeping it), the origin the
    registry answers on, and the credentials it may send (``secrets``)."""

    def __init__(
        self,
        client: httpx.Client,
        request: ManifestRequest,
        watchdog: Watchdog,
        *,
        attempts: int,
        retry_after_max_s: float,
        sleep: Callable[[float], None],
        monotonic: Callable[[], float],
    ):
        self.client = client
        self.request = request
        self.monotonic = monotonic
        self.deadline = monotonic() + request.timeout_s
        self.watchdog = watchdog
        self.attempts = attempts
        self.retry_after_max_s = retry_after_max_s
        self.sleep = sleep
        self.registry = request.registry
        self.scheme = "https"
        self.secrets: set[str] = set(request.credentials.secrets() if request.credentials else ())
        """Every credential this conversation may send, dropped from any text it quotes."""

    def quote(self, text: object) -> str:
        """Text the registry (or a host it sent us to) chose, as an error may quote it."""
        return registry_text(text, self.secrets)

    def host(self, url: httpx.URL) -> str:
        return self.quote(url.host)

    def error_code(self, reply: Reply) -> str:
        """`` CODE: message`` of a distribution error answer, quoted (``quote``)."""
        try:
            errors = load_untrusted_json(reply.body).get("errors")
            first = errors[0] if isinstance(errors, list) and errors else {}
            code, message = str(first.get("code", "")), str(first.get("message", ""))
        except (UnreadableJson, AttributeError):
            return ""
        text = self.quote(": ".join(part for part in (code, message) if part))
        return f" {text}" if text else ""

    def _left(self) -> float:
        """The seconds left before the deadline (none once the watchdog has fired)."""
        if self.watchdog.expired:
            return 0.0
        return self.deadline - self.monotonic()

    def _late(self, url: httpx.URL) -> Transient:
        return Transient(f"{self.host(url)} did not answer in time")

    @property
    def origin(self) -> Origin:
        return Origin.of(self.manifest_url())

    def manifest_url(self) -> httpx.URL:
        request = self.request
        return httpx.URL(
            f"{self.scheme}://{self.registry}/v2/{request.repository}/{request.kind}"
            f"/{request.reference}"
        )

    # -- one GET, its redirects and its retries ------------------------------------------

    def get(
        self,
        url: httpx.URL,
        authorization: str | None,
        *,
        max_bytes: int | None = None,
    ) -> Reply:
        """GET ``url`` (following redirects, ``authorization`` sent to ``url``'s origin only),
        retrying transient failures until the deadline."""
        bound = self.request.max_bytes if max_bytes is None else max_bytes

        def stop(state: tenacity.RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome else None
            if (
                isinstance(error, Transient)
                and error.retry_after is not None
                and error.retry_after > self.retry_after_max_s
            ):
                return True
            remaining = self._left()
            return state.attempt_number >= self.attempts or state.upcoming_sleep >= remaining

        def wait(state: tenacity.RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            if isinstance(error, Transient) and error.retry_after is not None:
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
            retry=tenacity.retry_if_exception_type(Transient),
            sleep=self.sleep,
            before_sleep=warn,
            reraise=True,
        )
        try:
            return retrying(self._follow, url, authorization, bound)
        except Transient as last:
            if last.retry_after is not None and last.retry_after > self.retry_after_max_s:
                rule = (
                    f"{last.reason} and asks to retry after {last.retry_after:.0f} s, more than"
                    f" the {self.retry_after_max_s:.0f} s waited at most"
                )
            else:
                rule = f"{last.reason} (within {self.request.timeout_s:.3g} s, retries included)"
            where = self.registry if Origin.of(url) == self.origin else self.host(url)
            raise RegistryUnavailable(field=where, rule=rule) from None

    def _follow(self, url: httpx.URL, authorization: str | None, bound: int) -> Reply:
        credential_origin = Origin.of(url)
        current = url
        for _ in range(REDIRECTS_MAX + 1):
            headers = {
                "Accept": self.request.accept,
                "Accept-Encoding": "identity",
            }
            if authorization is not None and Origin.of(current) == credential_origin:
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
                    rule=f"redirected to a {self.quote(target.scheme) or 'relative'} URL",
                )
            if target.userinfo:
                raise AnswerRefused(
                    field=self.registry,
                    rule=f"redirected to a URL with credentials in it ({self.host(target)})",
                )
            if target.scheme == "http" and not self.request.allow_http:
                raise AnswerRefused(
                    field=self.registry,
                    rule=f"redirected to plain HTTP ({self.host(target)}), which is not allowed",
                )
            if Origin.of(target) != credential_origin and "Authorization" in headers:
                log.info(
                    "%s: redirected to %s, without credentials", self.registry, self.host(target)
                )
            current = target
        raise AnswerRefused(field=self.registry, rule=f"redirected more than {REDIRECTS_MAX} times")

    def _exchange(self, url: httpx.URL, headers: dict[str, str], bound: int) -> Reply:
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
                    raise Transient(f"{self.host(url)} answered {status}", retry_after=wait)
                if status in REDIRECT_STATUSES:
                    return Reply(status, response.headers, b"", url)
                limit = bound if status == 200 else ERROR_BODY_MAX
                body = self._read(response, limit, refuse=status == 200)
                return Reply(status, response.headers, body, url)
        except httpx.TimeoutException:
            raise self._late(url) from None
        except httpx.ConnectError as error:
            if self.watchdog.expired:
                raise self._late(url) from None
            failure = _ssl_failure(error)
            if failure is None:
                raise Transient(f"cannot connect to {self.host(url)}:{url.port or ''}") from None
            if isinstance(failure, ssl.SSLCertVerificationError):
                raise RegistryUnavailable(
                    field=self.registry,
                    rule=f"{self.host(url)}'s certificate does not verify"
                    f" ({failure.verify_message}); TLS trusts the system store (SSL_CERT_FILE,"
                    " SSL_CERT_DIR)",
                ) from None
            if Origin.of(url) == self.origin and url.scheme == "https":
                raise NoTls from None
            raise Transient(f"TLS with {self.host(url)} failed ({failure.reason})") from None
        except httpx.TransportError as error:
            if self.watchdog.expired:
                raise self._late(url) from None
            raise Transient(f"{self.host(url)}: {type(error).__name__}") from None

    def _read(self, response: httpx.Response, limit: int, *, refuse: bool) -> bytes:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise AnswerRefused(
                field=self.registry,
                rule=f"sent its answer {self.quote(encoding)}-encoded; only identity was asked for",
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
