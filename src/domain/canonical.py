"""Canonical JSON bytes (sorted keys, UTF-8, trailing newline) and their SHA-256."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SHA256_HEX = re.compile(r"[0-9a-f]{64}")
"""A SHA-256 digest as this product writes it everywhere: 64 lowercase hex characters."""


def canonical_json(value: Any) -> bytes:
    """One byte string per value: sorted keys, two-space indent, UTF-8, a trailing newline."""
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
