"""What a site graphs about its store (docs/operations.md, "Metrics"): a snapshot of the store's
aliases, artifacts, layer cache and attempts, and totals of its history, computed from the
store and the history alone. No scheduler is asked and no lock is taken, so cron can take one
every minute while publishers work. Writing it in a format (Prometheus's text, JSON) is the
entry points' business; the numbers are all here."""

from __future__ import annotations

import bisect
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import get_args

from slurm_image.application.catalog_reader import CatalogReader
from slurm_image.application.errors import NoStore, UnknownAlias, VerificationFailed
from slurm_image.domain import layer_cache, paths
from slurm_image.domain.access import Access
from slurm_image.domain.architecture import ARCHITECTURES
from slurm_image.domain.errors import REFUSAL_RULES, DomainError
from slurm_image.domain.history import EventKind, HistoryEvent
from slurm_image.domain.layer_cache import CacheBound
from slurm_image.domain.roles import ROLES
from slurm_image.ports.clock import Clock
from slurm_image.ports.history import History
from slurm_image.ports.store import Store
from slurm_image.ports.workspace import NotFound, WorkspaceError

log = logging.getLogger(__name__)

JOB_SECONDS_BOUNDS = (
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
)
"""The upper bounds of the job run time's buckets, 10 s to 4 h (a longer job counts in +Inf)."""
PUBLISH_LATENCY_BOUNDS = (*JOB_SECONDS_BOUNDS, 28800.0, 86400.0)
"""From the plan's creation to the publication: the queue, the job and, for a job not waited
for, the time until someone ran ``publish``; up to a day."""

OPERATIONS = ("import", "inspect")
OUTCOMES = ("published", "failed", "cancelled")
"""How a lifecycle ended, as the history tells it: ``published`` (a ``published`` or
``replaced`` event: a new binding or a rebinding), ``failed`` (``job_failed``), ``cancelled``."""
_OUTCOME_OF: Mapping[str, str] = {
    "published": "published",
    "replaced": "published",
    "job_failed": "failed",
    "cancelled": "cancelled",
}
ATTEMPT_STATES = ("staged", "submission_unknown", "submitted", "unreadable")
"""What an attempt directory's own records say: never submitted, a submission started that
recorded no job, submitted (its job may have ended long ago: ``cleanup`` and ``gc`` remove
it); ``unreadable``: an entry of ``.tmp/jobs/`` that is no attempt directory of ours."""
CACHE_KINDS = ("layer", "download", "other")
"""A layer cache file: a blob, a download never finished, anything else (registry tokens)."""


@dataclass(frozen=True)
class Distribution:
    """Observations in cumulative buckets, as a Prometheus histogram holds them: ``cumulative``
    counts, for each of ``bounds``, the observations at most that bound."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    count: int
    total: float

    @classmethod
    def of(cls, values: Iterable[float], bounds: tuple[float, ...]) -> Distribution:
        ordered = sorted(values)
        return cls(
            bounds=bounds,
            cumulative=tuple(bisect.bisect_right(ordered, bound) for bound in bounds),
            count=len(ordered),
            total=math.fsum(ordered),
        )

    def as_dict(self) -> dict[str, object]:
        buckets = [
            {"le": bound, "count": count}
            for bound, count in zip(self.bounds, self.cumulative, strict=True)
        ]
        return {"buckets": buckets, "count": self.count, "sum": self.total}


@dataclass(frozen=True)
class AliasEntries:
    """Published alias entries of one role and architecture (None: an entry published before
    architectures were recorded)."""

    role: str
    architecture: str | None
    entries: int


@dataclass(frozen=True)
class Artifacts:
    """The store's artifacts that an alias names (``referenced``), or that none does (what
    ``gc`` removes)."""

    referenced: bool
    count: int
    bytes: int


@dataclass(frozen=True)
class LayerCacheUse:
    """The layer cache as found: its blobs, the bytes of its files by kind (``CACHE_KINDS``),
    and the bound ``gc`` keeps its blobs to."""

    path: str
    layers: int
    bytes: Mapping[str, int]
    max_bytes: int


@dataclass(frozen=True)
class Lifecycles:
    """Lifecycles of one operation that ended one way (``OUTCOMES``)."""

    operation: str
    outcome: str
    count: int


@dataclass(frozen=True)
class JobFailures:
    """Failed jobs of one operation with one exit code and scheduler state (None: not
    recorded)."""

    operation: str
    exit_code: int | None
    state: str | None
    count: int


@dataclass(frozen=True)
class JobRunTimes:
    """How long the jobs of one operation ran that ended one way (``published``, ``failed``)."""

    operation: str
    outcome: str
    seconds: Distribution


@dataclass(frozen=True)
class PublishLatencies:
    """From the plan's creation to the publication, for one operation."""

    operation: str
    seconds: Distribution


@dataclass(frozen=True)
class StoreMetrics:
    """One snapshot (see the module docstring). Gauges describe the store now; the history's
    figures are totals since its first line, so they only grow while the history does.
    ``store`` names the store (the ``store`` label of every series)."""

    store: str
    generated_at: datetime
    aliases: tuple[AliasEntries, ...]
    aliases_unreadable: int
    artifacts: tuple[Artifacts, ...]
    layer_cache: LayerCacheUse | None
    """None when the profile turns the cache off, it is not on this machine, or another user
    could change it (a warning says so)."""
    attempts: Mapping[str, int]
    events: Mapping[str, int]
    """History events by kind (``domain.history.EventKind``)."""
    history_skipped: int
    """History lines that are no event (a torn last line after a crash, anything unreadable)."""
    lifecycles: tuple[Lifecycles, ...]
    job_failures: tuple[JobFailures, ...]
    job_run_seconds: tuple[JobRunTimes, ...]
    publish_latency_seconds: tuple[PublishLatencies, ...]
    refusals: Mapping[str, int]
    """``refused`` events by rule: every rule of the product (``REFUSAL_RULES``), zeros too,
    and any other a front end recorded."""

    def as_dict(self) -> dict[str, object]:
        """The snapshot as JSON values (``metrics --json``)."""
        cache = self.layer_cache
        return {
            "store": self.store,
            "generated_at": self.generated_at.isoformat(),
            "aliases": [vars(item) for item in self.aliases],
            "aliases_unreadable": self.aliases_unreadable,
            "artifacts": [vars(item) for item in self.artifacts],
            "layer_cache": None
            if cache is None
            else {
                "path": cache.path,
                "layers": cache.layers,
                "bytes": dict(cache.bytes),
                "max_bytes": cache.max_bytes,
            },
            "attempts": dict(self.attempts),
            "history": {"events": dict(self.events), "skipped_lines": self.history_skipped},
            "lifecycles": [vars(item) for item in self.lifecycles],
            "job_failures": [vars(item) for item in self.job_failures],
            "job_run_seconds": [
                {"operation": item.operation, "outcome": item.outcome, **item.seconds.as_dict()}
                for item in self.job_run_seconds
            ],
            "publish_latency_seconds": [
                {"operation": item.operation, **item.seconds.as_dict()}
                for item in self.publish_latency_seconds
            ],
            "refusals": dict(self.refusals),
        }


class CollectMetrics:
    """Take a ``StoreMetrics`` snapshot (see the module docstring); with ``access``, only for
    the store's owner and the admins: the figures count every alias and event, the private
    ones included."""

    def __init__(
        self, store: Store, history: History, clock: Clock, *, access: Access | None = None
    ) -> None:
        self._store = store
        self._history = history
        self._clock = clock
        self._access = access
        self._reader = CatalogReader(store)
        self._layout = self._reader.layout

    def __call__(
        self, *, layer_cache: CacheBound | None = None, store_name: str | None = None
    ) -> StoreMetrics:
        """The snapshot, the store named ``store_name`` (default: its workspace root);
        ``NoStore`` when the workspace root has no ``images/`` (zeros there would hide a
        profile naming the wrong root)."""
        if self._access is not None:
            self._access.require_admin("metrics", "reading the store's figures (/metrics)")
        generated_at = self._clock.now()
        if self._store.entry_kind(self._layout.images) != "directory":
            raise NoStore(
                field="workspace_root",
                rule=f"{self._layout.images} is no directory: no store to count here (nothing"
                " was staged, published or refused under this root yet, or it is not the site's)",
            )
        entries, unreadable, referenced = self._aliases()
        read = self._history.read()
        return StoreMetrics(
            store=self._store.root if store_name is None else store_name,
            generated_at=generated_at,
            aliases=entries,
            aliases_unreadable=unreadable,
            artifacts=self._artifacts(referenced),
            layer_cache=None if layer_cache is None else self._layer_cache(layer_cache),
            attempts=self._attempts(),
            events=_events(read.events),
            history_skipped=read.skipped,
            lifecycles=_lifecycles(read.events),
            job_failures=_job_failures(read.events),
            job_run_seconds=_job_run_times(read.events),
            publish_latency_seconds=_publish_latencies(read.events),
            refusals=_refusals(read.events),
        )

    def _aliases(self) -> tuple[tuple[AliasEntries, ...], int, set[str]]:
        """The entries by role and architecture (every role and known architecture, zeros
        too), how many alias records could not be read, and the paths the entries name."""
        counts: Counter[tuple[str, str | None]] = Counter(
            {(role, architecture): 0 for role in ROLES for architecture in ARCHITECTURES}
        )
        unreadable = 0
        referenced: set[str] = set()
        for name in self._reader.names():
            try:
                published = self._reader.entries(name)
            except UnknownAlias:
                continue  # unregistered since the listing
            except (DomainError, VerificationFailed) as error:
                log.warning("metrics: %s.json is left out: %s", name, error)
                unreadable += 1
                continue
            for entry in published.entries:
                counts[(entry.record["role"], entry.record.get("architecture"))] += 1
                referenced.add(entry.record["path"])
        entries = tuple(
            AliasEntries(role, architecture, count)
            for (role, architecture), count in sorted(
                counts.items(), key=lambda item: (item[0][0], item[0][1] or "")
            )
        )
        return entries, unreadable, referenced

    def _artifacts(self, referenced: set[str]) -> tuple[Artifacts, ...]:
        try:
            sizes = self._store.file_sizes(self._layout.artifacts)
        except NotFound:
            sizes = {}
        found = {True: [0, 0], False: [0, 0]}
        for name, size in sizes.items():
            path = f"{self._layout.artifacts}/{name}"
            if self._layout.in_store(path) is None:
                continue  # not an artifact's name
            counted = found[path in referenced]
            counted[0] += 1
            counted[1] += size
        return tuple(Artifacts(kind, *found[kind]) for kind in (True, False))

    def _layer_cache(self, bound: CacheBound) -> LayerCacheUse | None:
        """The cache's files as ``gc`` sees them. One that is not here (not created yet, or on
        the nodes' own disks) is left out, as is, with a warning, one another user could change
        (``gc`` leaves both alone): zeros would say it is empty."""
        try:
            entries = self._store.cache_entries(bound.path)
        except NotFound:
            log.info("metrics: no layer cache at %s on this machine", bound.path)
            return None
        except WorkspaceError as error:
            log.warning("metrics: the layer cache is left out: %s", error.rule)
            return None
        sizes = dict.fromkeys(CACHE_KINDS, 0)
        layers = 0
        for entry in entries:
            if not entry.regular:
                continue
            if layer_cache.BLOB_NAME.fullmatch(entry.name):
                kind = "layer"
                layers += 1
            elif layer_cache.TEMPORARY_NAME.fullmatch(entry.name):
                kind = "download"
            else:
                kind = "other"
            sizes[kind] += entry.size
        return LayerCacheUse(bound.path, layers, sizes, bound.max_bytes)

    def _attempts(self) -> dict[str, int]:
        counts = dict.fromkeys(ATTEMPT_STATES, 0)
        if self._store.entry_kind(self._layout.jobs) != "directory":
            return counts
        for lifecycle_id in self._store.list_directory(self._layout.jobs):
            counts[self._attempt_state(lifecycle_id)] += 1
        return counts

    def _attempt_state(self, lifecycle_id: str) -> str:
        try:
            attempt = paths.AttemptLayout(self._store.root, lifecycle_id)
            if self._store.exists(attempt.submission_record):
                return "submitted"
            if self._store.exists(attempt.submission_claim):
                return "submission_unknown"
            return "staged"
        except (DomainError, WorkspaceError):
            return "unreadable"


def _operation(event: HistoryEvent) -> str:
    return event.operation or "unknown"


def _events(events: Iterable[HistoryEvent]) -> dict[str, int]:
    counts = dict.fromkeys(get_args(EventKind), 0)
    for event in events:
        counts[event.event] += 1
    return counts


def _lifecycles(events: Iterable[HistoryEvent]) -> tuple[Lifecycles, ...]:
    counts: Counter[tuple[str, str]] = Counter(
        {(operation, outcome): 0 for operation in OPERATIONS for outcome in OUTCOMES}
    )
    for event in events:
        outcome = _OUTCOME_OF.get(event.event)
        if outcome is not None:
            counts[(_operation(event), outcome)] += 1
    return tuple(Lifecycles(*key, count) for key, count in sorted(counts.items()))


def _job_failures(events: Iterable[HistoryEvent]) -> tuple[JobFailures, ...]:
    counts: Counter[tuple[str, int | None, str | None]] = Counter(
        (_operation(event), event.exit_code, event.state)
        for event in events
        if event.event == "job_failed"
    )
    return tuple(
        JobFailures(*key, count)
        for key, count in sorted(
            counts.items(), key=lambda item: (item[0][0], item[0][1] or 0, item[0][2] or "")
        )
    )


def _job_run_times(events: Iterable[HistoryEvent]) -> tuple[JobRunTimes, ...]:
    seconds: dict[tuple[str, str], list[float]] = {
        (operation, outcome): [] for operation in OPERATIONS for outcome in ("published", "failed")
    }
    for event in events:
        outcome = _OUTCOME_OF.get(event.event)
        if event.job_seconds is not None and outcome in ("published", "failed"):
            seconds.setdefault((_operation(event), outcome), []).append(event.job_seconds)
    return tuple(
        JobRunTimes(operation, outcome, Distribution.of(values, JOB_SECONDS_BOUNDS))
        for (operation, outcome), values in sorted(seconds.items())
    )


def _publish_latencies(events: Iterable[HistoryEvent]) -> tuple[PublishLatencies, ...]:
    seconds: dict[str, list[float]] = {operation: [] for operation in OPERATIONS}
    for event in events:
        if event.publish_latency_seconds is not None and event.event in ("published", "replaced"):
            seconds.setdefault(_operation(event), []).append(event.publish_latency_seconds)
    return tuple(
        PublishLatencies(operation, Distribution.of(values, PUBLISH_LATENCY_BOUNDS))
        for operation, values in sorted(seconds.items())
    )


def _refusals(events: Iterable[HistoryEvent]) -> dict[str, int]:
    counts = dict.fromkeys(REFUSAL_RULES, 0)
    for event in events:
        if event.event == "refused" and event.rule is not None:
            counts[event.rule] = counts.get(event.rule, 0) + 1
    return counts
