"""JSON a registry sent, parsed with its nesting bounded (docs/design.md, "Resolving a tag"):
every registry answer the product reads as JSON (manifests, indexes, token answers, error
answers, cosign's signature indexes, manifests, bundles and payloads) goes through
``load_untrusted_json``, and each reader turns ``UnreadableJson`` into its own refusal.

Python's parser recurses once per bracket: 400 KB of ``[`` would end the command with "maximum
recursion depth exceeded". Nothing a registry legitimately sends nests deeper than a handful of
levels (a Sigstore bundle, the deepest, about eight), so anything deeper than
``JSON_DEPTH_MAX`` is refused, found after parsing without recursing.
"""

from __future__ import annotations

import json
from typing import Any

from slurm_image.domain.errors import DomainError

JSON_DEPTH_MAX = 32
"""The deepest nesting of arrays and objects read from a registry."""


class UnreadableJson(DomainError):
    """Bytes that are not JSON, or nest deeper than ``JSON_DEPTH_MAX``: ``reason`` says which,
    as the end of a sentence about them ("the answer " + reason). Never leaves the domain: each
    reader raises its own error with it."""

    def __init__(self, reason: str) -> None:
        super().__init__(field="json", rule=reason)


def _too_deep(value: object, limit: int) -> bool:
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def load_untrusted_json(data: bytes | str, *, max_depth: int = JSON_DEPTH_MAX) -> Any:
    """The value of ``data``; ``UnreadableJson`` when it is not JSON (or not UTF-8) or its
    arrays and objects nest deeper than ``max_depth``."""
    deeper = f"nests deeper than {max_depth} levels"
    try:
        value = json.loads(data)
    except RecursionError:
        raise UnreadableJson(deeper) from None
    except ValueError:
        raise UnreadableJson("is not JSON") from None
    if _too_deep(value, max_depth):
        raise UnreadableJson(deeper)
    return value
