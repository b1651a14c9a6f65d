"""What a request to the gateway carries, read as untrusted input (docs/gateway.md, "Errors"):
its body is UTF-8 JSON nesting no deeper than ``JSON_DEPTH_MAX`` (``domain.untrusted_json``'s
rule, the one a registry's answers are held to), and every text in it, in its path and in its
query string is UTF-8 without NUL characters, a query's value at most ``MAX_QUERY_TEXT``
characters (its name at most ``MAX_QUERY_NAME``). Each refusal is one ``InvalidRequest`` naming
the field: ``body``, the body's field (``request.source``, ``lifecycle_ids.0``), ``path``, the
query parameter, or ``headers`` (at most ``MAX_HEAD_BYTES`` in all).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.untrusted_json import UnreadableJson, load_untrusted_json

TEXT_RULE = "must be UTF-8 text without NUL characters"
MAX_QUERY_TEXT = 4096
"""The longest value of a query parameter, in characters (names and ids are far shorter)."""
MAX_QUERY_NAME = 64
MAX_HEAD_BYTES = 32 * 1024
"""The most a request's headers may hold, names and values together: a MUNGE credential is at
most 4,096 characters, a browser's headers a few kilobytes."""
BODY = "body"


def request_body(data: bytes) -> Any:
    """The JSON value of a request's body; ``InvalidRequest`` naming ``body`` when it is not
    UTF-8 JSON or nests too deep, or naming the field whose name or text breaks ``TEXT_RULE``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(field=BODY, rule="must be JSON in UTF-8") from None
    try:
        value = load_untrusted_json(text)
    except UnreadableJson as error:
        raise InvalidRequest(field=BODY, rule=error.rule) from None
    _check_texts(value)
    return value


def _check_texts(value: Any) -> None:
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, where = pending.pop()
        if isinstance(item, str):
            if not _plain(item):
                raise InvalidRequest(field=where or BODY, rule=TEXT_RULE)
        elif isinstance(item, dict):
            for key, child in item.items():
                field = f"{where}.{key}" if where else key
                if not _plain(key):
                    raise InvalidRequest(field=where or BODY, rule=f"its names {TEXT_RULE}")
                pending.append((child, field))
        elif isinstance(item, list):
            pending.extend(
                (child, f"{where}.{index}" if where else str(index))
                for index, child in enumerate(item)
            )


def _plain(text: str) -> bool:
    """UTF-8 text without NUL: JSON's ``\\u0000`` and lone surrogates (``\\ud800``) are not."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _decoded(raw: bytes) -> str | None:
    """Percent-decoded ``raw`` as text, or None when it breaks ``TEXT_RULE``."""
    try:
        text = unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if "\x00" not in text else None


def check_headers(headers: list[tuple[bytes, bytes]]) -> None:
    """Refuse headers holding more than ``MAX_HEAD_BYTES``; ``InvalidRequest`` naming
    ``headers``."""
    if sum(len(name) + len(value) for name, value in headers) > MAX_HEAD_BYTES:
        raise InvalidRequest(
            field="headers", rule=f"must hold at most {MAX_HEAD_BYTES} bytes in all"
        )


def check_request_line(raw_path: bytes, query_string: bytes) -> None:
    """Refuse a path or query string whose percent-decoded text breaks ``TEXT_RULE``, or a query
    value longer than ``MAX_QUERY_TEXT``; ``InvalidRequest`` naming ``path`` or the parameter
    (``query`` when its very name is not text)."""
    if _decoded(raw_path) is None:
        raise InvalidRequest(field="path", rule=TEXT_RULE)
    for pair in query_string.split(b"&"):
        raw_name, _, raw_value = pair.partition(b"=")
        name = _decoded(raw_name.replace(b"+", b" "))
        if name is None:
            raise InvalidRequest(field="query", rule=f"its names {TEXT_RULE}")
        if len(name) > MAX_QUERY_NAME:
            raise InvalidRequest(
                field="query", rule=f"its names must be at most {MAX_QUERY_NAME} characters"
            )
        value = _decoded(raw_value.replace(b"+", b" "))
        if value is None:
            raise InvalidRequest(field=name, rule=TEXT_RULE)
        if len(value) > MAX_QUERY_TEXT:
            raise InvalidRequest(field=name, rule=f"must be at most {MAX_QUERY_TEXT} characters")
