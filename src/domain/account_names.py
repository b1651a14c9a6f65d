"""The rule of a user or group name, standard library only: the store's per-group directories
are named by it where nothing of the model library is loaded (``domain.by_name``)."""

from __future__ import annotations

import re

from slurm_image.domain.errors import InvalidRequest

ACCOUNT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?")
"""A user or group name as useradd and groupadd accept them (POSIX's portable characters, at
most 32, a trailing ``$`` for machine accounts)."""


def account_name(value: str, field: str) -> str:
    """``value`` if it is a user or group name, else ``InvalidRequest`` naming ``field``."""
    if not ACCOUNT_NAME.fullmatch(value):
        raise InvalidRequest(
            field=field,
            rule="must be a user or group name: a letter or _, then letters, digits, _ . -"
            " (at most 32)",
            value=value,
        )
    return value
