"""The one shell-quoting function. Every value the renderer puts into bash goes through it."""

from __future__ import annotations

import re

from slurm_image.domain.errors import InvalidIdentifier

_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def quote(value: str, field: str = "value") -> str:
    """Return ``value`` as one bash word that reads back as exactly ``value``.

    Safe words stay bare; everything else is single-quoted with ``'`` spelled ``'\\''``. A NUL
    cannot be held by a bash string, so it is refused rather than silently truncated.
    """
    if "\x00" in value:
        raise InvalidIdentifier(field=field, rule="must not contain a NUL character", value=value)
    if _SAFE.fullmatch(value):
        return value
    return "'" + value.replace("'", "'\\''") + "'"
