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

The modules: ``conversation`` (one request's GETs: redirects, retries, bounds, the deadline),
``auth`` (answering a challenge: Basic, the Bearer token dance and the token cache) and
``manifests`` (the manifest's request and what its answer becomes).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from slurm_image.adapters.deadline import Watchdog
from slurm_image.adapters.oci_registry.auth import Authentication, TokenCache
from slurm_image.adapters.oci_registry.conversation import (
    ATTEMPTS,
    ERROR_BODY_MAX,
    REDIRECT_STATUSES,
    REDIRECTS_MAX,
    RETRY_AFTER_MAX_S,
    TRANSIENT_STATUSES,
    Conversation,
)
from slurm_image.adapters.oci_registry.manifests import fetch
from slurm_image.ports.registry import ManifestAnswer, ManifestRequest

__all__ = [
    "ATTEMPTS",
    "ERROR_BODY_MAX",
    "REDIRECTS_MAX",
    "REDIRECT_STATUSES",
    "RETRY_AFTER_MAX_S",
    "TRANSIENT_STATUSES",
    "USER_AGENT",
    "HttpRegistry",
]

USER_AGENT = "slurm-image"


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
        self._tokens = TokenCache()
        self._context: ssl.SSLContext | None = None

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            self._context = ssl.create_default_context()
        return self._context

    def fetch_manifest(self, request: ManifestRequest) -> ManifestAnswer:
        watchdog = Watchdog(request.timeout_s)
        try:
            with self._client() as client:
                conversation = Conversation(
                    client,
                    request,
                    watchdog,
                    attempts=self._attempts,
                    retry_after_max_s=self._retry_after_max_s,
                    sleep=self._sleep,
                    monotonic=self._monotonic,
                )
                return fetch(conversation, Authentication(conversation, self._tokens))
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
