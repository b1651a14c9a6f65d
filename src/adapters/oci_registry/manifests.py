"""The manifest's request: the first try (with a token still valid, else anonymous), the
plain-HTTP retry of a registry without TLS, the answer to a 401, and what the final answer
becomes: a ``ManifestAnswer`` or the port's error naming the registry (the package's
docstring)."""

from __future__ import annotations

import logging

from slurm_image.adapters.oci_registry.auth import Authentication, with_entry
from slurm_image.adapters.oci_registry.conversation import Conversation, NoTls, Reply
from slurm_image.ports.registry import (
    ManifestAnswer,
    RegistryAuthFailed,
    RegistryNotFound,
    RegistryRejected,
    RegistryUnavailable,
)

log = logging.getLogger(__name__)


def fetch(conversation: Conversation, auth: Authentication) -> ManifestAnswer:
    """The manifest ``conversation.request`` names, authenticated by ``auth``."""
    request = conversation.request
    registry = conversation.registry
    log.info("asking %s for %s:%s", registry, request.repository, request.reference)
    try:
        reply, authorization = _first_try(conversation, auth)
    except NoTls:
        if not request.allow_http:
            raise RegistryUnavailable(
                field=registry,
                rule="does not speak TLS on its port; a plain-HTTP registry is asked only"
                " when [enroot] environment sets ENROOT_ALLOW_HTTP, as for the import job",
            ) from None
        log.info("%s does not speak TLS: asking it over plain HTTP, anonymously", registry)
        conversation.scheme = "http"
        reply, authorization = conversation.get(conversation.manifest_url(), None), None
    if reply.status == 401:
        authorization = auth.answer(reply)
        reply = conversation.get(conversation.manifest_url(), authorization)
        if reply.status == 401:
            auth.require_own_origin(reply)
            raise auth.refused(authorization)
    return _result(conversation, reply)


def _first_try(conversation: Conversation, auth: Authentication) -> tuple[Reply, str | None]:
    """The first request: with a token still valid from an earlier challenge of this
    registry and repository, else anonymous; a refused token is dropped."""
    authorization = auth.cached()
    if authorization is None:
        return conversation.get(conversation.manifest_url(), None), None
    reply = conversation.get(conversation.manifest_url(), authorization)
    if reply.status == 401:
        auth.drop_cached()
        return reply, None
    return reply, authorization


def _result(conversation: Conversation, reply: Reply) -> ManifestAnswer:
    request = conversation.request
    registry = conversation.registry
    what = f"{request.repository}:{request.reference}"
    if reply.status == 200:
        return ManifestAnswer(
            data=reply.body,
            content_type=reply.headers.get("content-type"),
            content_digest=reply.headers.get("docker-content-digest"),
        )
    code = conversation.error_code(reply)
    if reply.status == 404:
        raise RegistryNotFound(field=registry, rule=f"has no {what} (answered 404{code})")
    if reply.status == 403:
        raise RegistryAuthFailed(
            field=registry,
            rule=f"denies access to {what} (403{code})" + with_entry(request.credentials),
        )
    raise RegistryRejected(field=registry, rule=f"answered {reply.status}{code} for {what}")
