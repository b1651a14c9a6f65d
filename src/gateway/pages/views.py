"""What the catalog's pages show, as plain text for the templates: the published aliases
(``PublishedAlias``, as ``list`` and ``show`` read them), the history's events and the queue's
lifecycles turned into rows. Every value stays the text it was in the record; escaping is the
templates' (autoescaped) and the script's (``textContent``) business, never this module's.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from slurm_image.domain.architecture import from_machine
from slurm_image.domain.by_name import stable_path_of
from slurm_image.domain.errors import DomainError, InvalidReference, NoImageForArchitecture
from slurm_image.domain.history import HistoryEvent
from slurm_image.domain.listing import at_path, key_facts, text_value
from slurm_image.domain.published import PublishedAlias, choose_entry
from slurm_image.domain.reference import parse_reference, parse_tag_reference
from slurm_image.domain.shell import quote
from slurm_image.domain.sizes import for_person

UNKNOWN = "unknown"
UNSIGNED = "unsigned"
DOCKER_HUB = "docker.io"
ENDED_EVENTS = ("published", "replaced", "job_failed", "cancelled")
"""The history's events that end a lifecycle, as ``/requests`` lists them."""
ENDED_WITHIN = timedelta(hours=24)
ENDED_MAX = 50
SRUN_ARGS = "--pty bash"
"""What the copyable ``srun`` line runs in the image: a shell (the user's own command goes
there instead)."""


def this_machine() -> str | None:
    """This host's architecture as the store names it (None: one the product builds none for)."""
    return from_machine(platform.machine())


def _short(digest: str | None, length: int = 12) -> str:
    if not digest:
        return "-"
    return digest.removeprefix("sha256:")[:length]


def _time(value: str | None) -> str:
    """An ISO time as the pages print it: to the second, UTC."""
    if not value:
        return "-"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC)
    return parsed.strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float | None) -> str:
    """``1h 02m``, ``3m 05s``, ``42s``; ``-`` when not known."""
    if seconds is None or seconds < 0:
        return "-"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


@dataclass(frozen=True)
class Source:
    """Where an entry came from: the registry and repository of an import (the tag it was
    resolved from, when it was), or the path of an inspected ``.sqsh``."""

    text: str
    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None

    @property
    def imported(self) -> bool:
        return self.repository is not None

    @property
    def where(self) -> str:
        if self.repository is None:
            return self.text
        return f"{self.registry}/{self.repository}"


def _tag_of(resolved: str | None) -> str | None:
    """The tag of ``resolved_from.tag`` (``registry/repo:TAG``)."""
    if resolved is None:
        return None
    try:
        return parse_tag_reference(resolved).tag
    except DomainError:
        return resolved


def source_of(record: Mapping[str, Any]) -> Source:
    text = text_value(record.get("source")) or ""
    resolved_tag = _tag_of(text_value(at_path(record, "resolved_from", "tag")))
    try:
        reference = parse_reference(text)
    except InvalidReference:
        return Source(text=text, tag=resolved_tag)
    return Source(
        text=text,
        registry=reference.registry or DOCKER_HUB,
        repository=reference.repository,
        tag=resolved_tag or reference.tag,
        digest=reference.digest,
    )


@dataclass(frozen=True)
class Facts:
    """The facts that matter for choosing an image, as its inspection found them."""

    python: str | None
    pip: str | None
    vllm: str | None

    @property
    def words(self) -> list[str]:
        named = (("Python", self.python), ("pip", self.pip), ("vLLM", self.vllm))
        return [f"{name} {version}" for name, version in named if version]


def facts_of(record: Mapping[str, Any]) -> Facts:
    found = key_facts(record)
    return Facts(python=found.python, pip=found.pip, vllm=found.vllm)


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []


def signer_of(record: Mapping[str, Any]) -> str:
    return text_value(at_path(record, "signed_by", "key_fingerprint")) or UNSIGNED


@dataclass(frozen=True)
class CatalogRow:
    """One alias in the catalog's table: its entry for this machine (else its first)."""

    name: str
    role: str
    architectures: list[str]
    source: Source
    signer: str
    owner: str
    group: str
    private: bool
    size: int
    size_text: str
    published_at: str
    published_text: str
    facts: Facts

    @property
    def search(self) -> str:
        """What the page's filter matches: name, source, tag, signer, owner and the facts."""
        words = [
            self.name,
            self.role,
            *self.architectures,
            self.source.text,
            self.source.tag or "",
            self.signer,
            self.owner,
            self.group,
            *self.facts.words,
        ]
        return " ".join(word for word in words if word).lower()


def _owner(published: PublishedAlias) -> str:
    return published.owned.user or "the store's owner"


def catalog_rows(entries: Iterable[PublishedAlias], machine: str | None) -> list[CatalogRow]:
    """One row per alias, sorted by name: the entry for ``machine``, else the alias's first."""
    chosen: dict[str, PublishedAlias] = {}
    for published in entries:
        name = str(published.record.get("name"))
        here = published.record.get("architecture") == machine
        if name not in chosen or here:
            chosen[name] = published
    rows = []
    for name in sorted(chosen):
        published = chosen[name]
        record = published.record
        size = record.get("size")
        size = size if isinstance(size, int) else 0
        published_at = text_value(record.get("published_at")) or ""
        rows.append(
            CatalogRow(
                name=name,
                role=str(record.get("role")),
                architectures=[a or UNKNOWN for a in published.architectures],
                source=source_of(record),
                signer=signer_of(record),
                owner=_owner(published),
                group=published.owned.group or "",
                private=published.owned.private,
                size=size,
                size_text=for_person(size),
                published_at=published_at,
                published_text=_time(published_at),
                facts=facts_of(record),
            )
        )
    return rows


@dataclass(frozen=True)
class Entry:
    """One architecture's entry of an alias, everything its record holds."""

    architecture: str
    record: Mapping[str, Any]
    source: Source
    signer: str
    facts: Facts
    size_text: str
    published_text: str
    srun: str

    @property
    def chain(self) -> Mapping[str, Any] | None:
        chain = self.record.get("chain")
        return chain if isinstance(chain, Mapping) else None

    @property
    def resolved_from(self) -> Mapping[str, Any] | None:
        value = self.record.get("resolved_from")
        return value if isinstance(value, Mapping) else None

    @property
    def signed_by(self) -> Mapping[str, Any] | None:
        value = self.record.get("signed_by")
        return value if isinstance(value, Mapping) else None

    @property
    def all_facts(self) -> Mapping[str, Any]:
        facts = self.record.get("facts")
        return facts if isinstance(facts, Mapping) else {}

    @property
    def distributions(self) -> list[tuple[str, str]]:
        return _pairs(at_path(self.all_facts, "distributions"), "name", "version")

    @property
    def shadowed(self) -> list[tuple[str, str]]:
        return [
            (f"{name} {version}", location)
            for name, version, location in _triples(
                at_path(self.all_facts, "shadowed"), "name", "version", "location"
            )
        ]

    @property
    def programs(self) -> list[tuple[str, str, str]]:
        """The interpreter, installer and server the inspection found: (what, version, path)."""
        facts = self.all_facts
        found = []
        python = at_path(facts, "python")
        if isinstance(python, Mapping):
            implementation = text_value(python.get("implementation")) or "python"
            abi = text_value(python.get("abi"))
            version = text_value(python.get("version")) or "-"
            found.append(
                (
                    f"{implementation} ({abi})" if abi else implementation,
                    version,
                    text_value(python.get("executable")) or "-",
                )
            )
        for key in ("installer", "server"):
            program = at_path(facts, key)
            if isinstance(program, Mapping):
                found.append(
                    (
                        text_value(program.get("name")) or key,
                        text_value(program.get("version")) or "-",
                        text_value(program.get("path")) or "-",
                    )
                )
        return found


def _pairs(value: object, first: str, second: str) -> list[tuple[str, str]]:
    return [(str(at_path(item, first)), str(at_path(item, second))) for item in _list(value)]


def _triples(value: object, first: str, second: str, third: str) -> list[tuple[str, str, str]]:
    return [
        (str(at_path(item, first)), str(at_path(item, second)), str(at_path(item, third)))
        for item in _list(value)
    ]


def srun_line(path: str) -> str:
    """The line that runs the image with Pyxis (docs/enroot.md, "Pyxis"), the path quoted."""
    return f"srun --container-image={quote(path)} {SRUN_ARGS}"


@dataclass(frozen=True)
class HistoryRow:
    time: str
    event: str
    architecture: str
    who: str
    artifact: str
    previous: str
    lifecycle_id: str


def history_rows(events: Iterable[HistoryEvent]) -> list[HistoryRow]:
    """The alias's events, newest first."""
    return [
        HistoryRow(
            time=event.time.strftime("%Y-%m-%d %H:%M:%SZ"),
            event=event.event,
            architecture=event.architecture or "-",
            who=f"{event.user}@{event.host}",
            artifact=_short(event.artifact),
            previous=_short(event.previous_artifact),
            lifecycle_id=event.lifecycle_id or "-",
        )
        for event in sorted(events, key=lambda e: e.time, reverse=True)
    ]


@dataclass(frozen=True)
class AliasPage:
    """Everything ``/aliases/NAME`` shows."""

    name: str
    role: str
    owner: str
    group: str
    private: bool
    machine: str | None
    entries: list[Entry]
    history: list[HistoryRow]

    @property
    def here(self) -> Entry | None:
        """The entry ``show`` resolves on this machine (``published.choose_entry``), whose
        ``srun`` line the page offers; None when the alias has none for it."""
        recorded = [text_value(entry.record.get("architecture")) for entry in self.entries]
        try:
            index = choose_entry(self.name, recorded, asked=None, machine=self.machine)
        except NoImageForArchitecture:
            return None
        return self.entries[index]

    @property
    def architectures(self) -> list[str]:
        return [entry.architecture for entry in self.entries]


def alias_page(
    name: str,
    entries: Sequence[PublishedAlias],
    events: Iterable[HistoryEvent],
    machine: str | None,
) -> AliasPage:
    """The page of alias ``name`` from its entries (one per architecture) and its history."""
    first = entries[0]
    group = first.owned.group if first.owned.private else None
    shown = []
    for published in entries:
        record = published.record
        path = text_value(record.get("path")) or ""
        architecture = text_value(record.get("architecture"))
        size = record.get("size")
        shown.append(
            Entry(
                architecture=text_value(record.get("architecture")) or UNKNOWN,
                record=record,
                source=source_of(record),
                signer=signer_of(record),
                facts=facts_of(record),
                size_text=for_person(size) if isinstance(size, int) else "-",
                published_text=_time(text_value(record.get("published_at"))),
                srun=srun_line(stable_path_of(name, path, architecture, group) or path),
            )
        )
    return AliasPage(
        name=name,
        role=str(first.record.get("role")),
        owner=_owner(first),
        group=first.owned.group or "",
        private=first.owned.private,
        machine=machine,
        entries=shown,
        history=history_rows(events),
    )


@dataclass(frozen=True)
class InFlight:
    """A lifecycle in flight, as ``/requests`` shows it."""

    lifecycle_id: str
    aliases: str
    requesters: str
    source: str
    architecture: str
    state: str
    phase: str
    progress: str
    elapsed: str


@dataclass(frozen=True)
class Ended:
    """A lifecycle that ended recently: the history's event."""

    time: str
    event: str
    alias: str
    requester: str
    source: str
    elapsed: str


@dataclass(frozen=True)
class RequestsView:
    in_flight: list[InFlight] = field(default_factory=list)
    ended: list[Ended] = field(default_factory=list)
    updated: str = ""

    def as_json(self) -> dict[str, Any]:
        """What the page's script polls for (``/requests.json``): the same rows as text."""
        return {
            "in_flight": [asdict(row) for row in self.in_flight],
            "ended": [asdict(row) for row in self.ended],
            "updated": self.updated,
        }


def progress_text(counters: object) -> str:
    """The progress record's counters for a person: ``1/4 layers, 3.0 MB of 12.0 MB``."""
    if not isinstance(counters, Mapping):
        return "-"
    words = []
    layers_done, layers_total = counters.get("layers_done"), counters.get("layers_total")
    if isinstance(layers_done, int) and isinstance(layers_total, int):
        words.append(f"{layers_done}/{layers_total} layers")
    done, total = counters.get("bytes_done"), counters.get("bytes_total")
    if isinstance(done, int) and isinstance(total, int):
        words.append(f"{for_person(done)} of {for_person(total)}")
    return ", ".join(words) or "-"


def _since(stamp: object, now: datetime) -> str:
    if not isinstance(stamp, str):
        return "-"
    try:
        started = datetime.fromisoformat(stamp)
    except ValueError:
        return "-"
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return duration((now - started).total_seconds())


def requests_view(
    queue: Iterable[Mapping[str, Any]], events: Iterable[HistoryEvent], now: datetime
) -> RequestsView:
    """The lifecycles in flight (``Lifecycles.queue``) and those ended within
    ``ENDED_WITHIN`` (the history's ``ENDED_EVENTS``, newest first, at most ``ENDED_MAX``)."""
    in_flight = []
    for entry in queue:
        orders = [order for order in _list(entry.get("orders")) if isinstance(order, Mapping)]
        first = orders[0] if orders else {}
        in_flight.append(
            InFlight(
                lifecycle_id=str(entry.get("lifecycle_id")),
                aliases=", ".join(str(order.get("alias")) for order in orders),
                requesters=", ".join(
                    dict.fromkeys(str(order.get("requester") or "-") for order in orders)
                ),
                source=str(entry.get("source")),
                architecture=str(entry.get("architecture") or "-"),
                state=str(entry.get("state") or UNKNOWN),
                phase=str(entry.get("phase") or "-"),
                progress=progress_text(entry.get("progress")),
                elapsed=_since(first.get("ordered_at"), now),
            )
        )
    ended_events = sorted(
        (e for e in events if e.event in ENDED_EVENTS and now - e.time <= ENDED_WITHIN),
        key=lambda e: e.time,
        reverse=True,
    )[:ENDED_MAX]
    ended = [
        Ended(
            time=event.time.strftime("%Y-%m-%d %H:%M:%SZ"),
            event=event.event,
            alias="/".join(part for part in (event.alias, event.architecture) if part) or "-",
            requester=event.user,
            source=event.source_digest or "-",
            elapsed=duration(event.job_seconds),
        )
        for event in ended_events
    ]
    return RequestsView(in_flight, ended, now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ"))
