"""What ``list`` prints of the published aliases, a page at a time (docs/cli.md, "list";
docs/gateway.md, "The API"): one summary per entry, the full record staying ``show``'s.

A summary holds the keys ``list`` always printed (``SUMMARY_KEYS``, who the alias belongs to)
and the alias's ``architectures`` and the facts that matter for choosing an image
(``key_facts``: its Python and vLLM versions, null when the inspection found none). Pages are
of aliases in name order (every entry of an alias in the same page): at most ``limit`` aliases
after the name ``after``, filtered by ``role``, ``owner`` and a name ``prefix``; ``next`` is the
``after`` of the following page, None on the last. Standard library only: the catalog's cheap
read uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from slurm_image.domain import paths
from slurm_image.domain.errors import InvalidRequest
from slurm_image.domain.published import OWNERSHIP_KEYS, SUMMARY_KEYS, PublishedAlias
from slurm_image.domain.roles import ROLES

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
"""The aliases one page holds at most (``limit``)."""
MAX_PAGES = 1_000_000
"""Pages a reader asks for before it gives up on a gateway whose ``next`` never ends."""
LISTING_KEYS = (*SUMMARY_KEYS, *OWNERSHIP_KEYS, "architectures", "python_version", "vllm_version")
"""The keys of one summary, in the order ``list --json`` prints them."""


@dataclass(frozen=True)
class KeyFacts:
    """The facts that matter for choosing an image, as its inspection found them."""

    python: str | None
    pip: str | None
    vllm: str | None


def at_path(mapping: object, *keys: str) -> object:
    """What an untrusted record holds at ``keys``, nested; None where any step is missing or
    not a mapping."""
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def text_value(value: object) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None


def _distribution(facts: object, name: str) -> str | None:
    found = at_path(facts, "distributions")
    for entry in found if isinstance(found, list) else []:
        if at_path(entry, "name") == name:
            return text_value(at_path(entry, "version"))
    return None


def key_facts(record: Mapping[str, Any]) -> KeyFacts:
    """The Python, pip and vLLM versions of an entry's facts (vLLM: the server's version, else
    the installed distribution's), None where the inspection found none."""
    facts = record.get("facts")
    return KeyFacts(
        python=text_value(at_path(facts, "python", "version")),
        pip=text_value(at_path(facts, "installer", "version")) or _distribution(facts, "pip"),
        vllm=text_value(at_path(facts, "server", "version")) or _distribution(facts, "vllm"),
    )


def summary_of(published: PublishedAlias) -> dict[str, object]:
    """One entry's summary (``LISTING_KEYS``)."""
    facts = key_facts(published.record)
    return (
        published.summary()
        | published.owned.fields()
        | {
            "architectures": list(published.architectures),
            "python_version": facts.python,
            "vllm_version": facts.vllm,
        }
    )


@dataclass(frozen=True)
class ListQuery:
    """One page asked for (see the module docstring); every field checked when made
    (``InvalidRequest`` naming it)."""

    limit: int = DEFAULT_LIMIT
    after: str | None = None
    role: str | None = None
    owner: str | None = None
    prefix: str | None = None

    def __post_init__(self) -> None:
        if type(self.limit) is not int or not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidRequest(
                field="limit", rule=f"must be an integer from 1 to {MAX_LIMIT}", value=self.limit
            )
        if self.after is not None:
            paths.name(self.after, "after")
        if self.role is not None and self.role not in ROLES:
            raise InvalidRequest(
                field="role", rule=f"must be one of {', '.join(ROLES)}", value=self.role
            )
        if self.owner is not None:
            from slurm_image.domain.requester import account_name

            account_name(self.owner, "owner")
        if self.prefix is not None and not paths.NAME_PATTERN.fullmatch(self.prefix):
            raise InvalidRequest(
                field="prefix",
                rule="must be the start of an alias name: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
                value=self.prefix,
            )

    def wants_name(self, name: str) -> bool:
        """Whether an alias named ``name`` belongs after this page's start and to its prefix."""
        return (self.after is None or name > self.after) and (
            self.prefix is None or name.startswith(self.prefix)
        )

    def wants(self, published: PublishedAlias) -> bool:
        """Whether an entry passes the ``role`` and ``owner`` filters."""
        return (self.role is None or published.record.get("role") == self.role) and (
            self.owner is None or published.owned.user == self.owner
        )


@dataclass(frozen=True)
class SummaryPage:
    """One page of summaries, and the ``after`` of the next page (None: the last)."""

    images: tuple[dict[str, object], ...]
    next: str | None = None


def every_summary(
    page: Callable[[ListQuery], SummaryPage], query: ListQuery | None = None
) -> list[dict[str, object]]:
    """Every summary ``query`` (default: everything) selects, asking ``page`` for one page
    after another until the last; a ``next`` that does not move on is refused."""
    query = query if query is not None else ListQuery(limit=MAX_LIMIT)
    found: list[dict[str, object]] = []
    for _ in range(MAX_PAGES):
        answered = page(query)
        found.extend(answered.images)
        if answered.next is None:
            return found
        if query.after is not None and answered.next <= query.after:
            break
        query = replace(query, after=answered.next)
    raise InvalidRequest(field="next", rule="a page's next must come after the page it ends")
