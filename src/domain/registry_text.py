"""Text a registry sent, as an error or a listing may quote it (docs/design.md, "Registry
authentication"). What a registry, a mirror or a proxy says (an error answer's code and
message, a header, a host it redirects to, a media type) is untrusted: it may hold control
characters that rewrite the terminal, run for megabytes, or echo the credentials it was sent
(a 403 whose message repeats the ``Authorization`` header it received). Every place the
product quotes such text goes through ``registry_text``, which drops the credentials sent to
that registry, the control characters, and everything past a bound.
"""

from __future__ import annotations

from collections.abc import Iterable

REGISTRY_TEXT_MAX = 200
"""The most characters of a registry's text quoted in one place."""
REMOVED = "<credential removed>"


def _printable(text: str) -> str:
    return "".join(character for character in text if character.isprintable())


def registry_text(
    text: object, secrets: Iterable[str] = (), *, limit: int = REGISTRY_TEXT_MAX
) -> str:
    """``text`` as an error may print it: every character that is not printable (control,
    format and separator characters but the space) removed, then every occurrence of one of
    ``secrets`` (what was sent to that registry: a password, the base64 of a Basic login, a
    token) replaced by ``REMOVED``, then cut to ``limit`` characters (``...`` marks the cut).
    Removing the control characters first means none hidden inside an echoed secret saves
    it."""
    quoted = _printable(str(text))
    for secret in sorted({_printable(secret) for secret in secrets} - {""}, key=len, reverse=True):
        quoted = quoted.replace(secret, REMOVED)
    return quoted if len(quoted) <= limit else quoted[:limit] + "..."
