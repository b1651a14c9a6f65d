"""Sizes written as the profile writes them (``memory``, ``layer_cache_max``): a positive
integer and one unit of K, M, G or T (powers of 1024); and sizes as a person reads them
(``for_person``: decimal units, as the job's progress and the catalog's pages show them)."""

from __future__ import annotations

import re

SIZE_PATTERN = re.compile(r"[1-9][0-9]*[KMGT]")
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size_bytes(value: str) -> int:
    """``value`` (``SIZE_PATTERN``, already validated) in bytes."""
    return int(value[:-1]) * _UNITS[value[-1]]


def for_person(count: int) -> str:
    """Bytes for a person, in decimal units: ``2.0 MB``, ``512 B``."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
