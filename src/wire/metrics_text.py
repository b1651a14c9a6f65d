"""A ``StoreMetrics`` snapshot in Prometheus's text format, as node_exporter's textfile
collector reads it (docs/operations.md, "Metrics"). The families are built by a collector of
their own in a fresh registry each time, never the process-wide one: the history's totals are
counters whose values come from the snapshot, not from increments in this process.

Here and not in an adapter: the snapshot is a use case's type, and adapters import nothing of
the use cases (pyproject.toml's import-linter contracts); only the entry points import
``prometheus_client``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from slurm_image.application.metrics import Distribution, StoreMetrics

PREFIX = "slurm_image_"
UNKNOWN = "unknown"
"""The label value of what the record does not say (an architecture, exit code or state)."""


def _label(value: object) -> str:
    return UNKNOWN if value is None else str(value)


_Family = TypeVar("_Family", GaugeMetricFamily, CounterMetricFamily)
_Value = TypeVar("_Value")


def _with_samples(family: _Family, samples: Iterable[tuple[Sequence[str], float]]) -> _Family:
    for values, value in samples:
        family.add_metric(values, value)
    return family


class StoreCollector:
    """The families of one snapshot (a ``prometheus_client`` custom collector). Every series
    carries the ``store`` label first (``StoreMetrics.store``), so that the textfiles of two
    stores in one node_exporter directory never hold the same series; every family's help
    text is the same for every store, which node_exporter requires of one name across files."""

    def __init__(self, metrics: StoreMetrics) -> None:
        self._metrics = metrics

    def _labelled(
        self, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], _Value]]
    ) -> tuple[list[str], list[tuple[list[str], _Value]]]:
        store = self._metrics.store
        return ["store", *labels], [([store, *values], value) for values, value in samples]

    def _gauge(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        samples: Iterable[tuple[Sequence[str], float]],
    ) -> GaugeMetricFamily:
        names, labelled = self._labelled(labels, samples)
        family = GaugeMetricFamily(PREFIX + name, documentation, labels=names)
        return _with_samples(family, labelled)

    def _counter(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        samples: Iterable[tuple[Sequence[str], float]],
    ) -> CounterMetricFamily:
        names, labelled = self._labelled(labels, samples)
        family = CounterMetricFamily(PREFIX + name, documentation, labels=names)
        return _with_samples(family, labelled)

    def _histogram(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        samples: Iterable[tuple[Sequence[str], Distribution]],
    ) -> HistogramMetricFamily:
        names, labelled = self._labelled(labels, samples)
        family = HistogramMetricFamily(PREFIX + name, documentation, labels=names)
        for values, distribution in labelled:
            buckets = [
                (str(float(bound)), float(count))
                for bound, count in zip(distribution.bounds, distribution.cumulative, strict=True)
            ]
            buckets.append(("+Inf", float(distribution.count)))
            family.add_metric(values, buckets, distribution.total)
        return family

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        yield self._gauge(
            "aliases",
            "Published alias entries (one per alias and architecture), by role and architecture.",
            ("role", "architecture"),
            (((a.role, _label(a.architecture)), a.entries) for a in m.aliases),
        )
        yield self._gauge(
            "aliases_unreadable",
            "Alias records that could not be read, left out of slurm_image_aliases.",
            (),
            [((), m.aliases_unreadable)],
        )
        artifacts = [(("true" if a.referenced else "false",), a) for a in m.artifacts]
        yield self._gauge(
            "artifacts",
            "Artifacts (.sqsh) in the store; referenced=false: named by no alias, gc removes them.",
            ("referenced",),
            ((labels, a.count) for labels, a in artifacts),
        )
        yield self._gauge(
            "artifacts_bytes",
            "Bytes of the artifacts in the store.",
            ("referenced",),
            ((labels, a.bytes) for labels, a in artifacts),
        )
        if m.layer_cache is not None:
            cache = m.layer_cache
            yield self._gauge(
                "layer_cache_bytes",
                "Bytes of the layer cache's files: layers, downloads never finished, other.",
                ("kind",),
                (((kind,), size) for kind, size in cache.bytes.items()),
            )
            yield self._gauge(
                "layer_cache_layers", "Layers in the layer cache.", (), [((), cache.layers)]
            )
            yield self._gauge(
                "layer_cache_max_bytes",
                "The bytes gc keeps the layer cache's layers to (enroot.layer_cache_max).",
                (),
                [((), cache.max_bytes)],
            )
        yield self._gauge(
            "attempts",
            "Attempt directories left in .tmp/jobs (until cleanup or gc), by what their own"
            " records say: staged, submission_unknown, submitted; unreadable: no attempt of ours.",
            ("state",),
            (((state,), count) for state, count in m.attempts.items()),
        )
        yield self._counter(
            "history_events_total",
            "Events in the store's history, by kind.",
            ("event",),
            (((kind,), count) for kind, count in m.events.items()),
        )
        yield self._gauge(
            "history_skipped_lines",
            "Lines of the history that are no event (a torn last line after a crash).",
            (),
            [((), m.history_skipped)],
        )
        yield self._counter(
            "lifecycles_total",
            "Imports and inspections that ended, by outcome: published (or replaced), failed"
            " (the job ended without a result), cancelled.",
            ("operation", "outcome"),
            (((item.operation, item.outcome), item.count) for item in m.lifecycles),
        )
        yield self._counter(
            "job_failures_total",
            "Jobs that ended without a result to publish, by the job's exit code and state.",
            ("operation", "exit_code", "state"),
            (
                ((item.operation, _label(item.exit_code), _label(item.state)), item.count)
                for item in m.job_failures
            ),
        )
        yield self._histogram(
            "job_run_seconds",
            "How long the jobs ran, by operation and outcome (published or failed).",
            ("operation", "outcome"),
            (((item.operation, item.outcome), item.seconds) for item in m.job_run_seconds),
        )
        yield self._histogram(
            "publish_latency_seconds",
            "From the plan's creation to the publication, by operation.",
            ("operation",),
            (((item.operation,), item.seconds) for item in m.publish_latency_seconds),
        )
        yield self._counter(
            "refusals_total",
            "Requests refused on the site's word (its policy, its keys, a registry's answer that"
            " did not hold, a front end's own rules), by the rule that refused.",
            ("rule",),
            (((rule,), count) for rule, count in m.refusals.items()),
        )
        yield self._gauge(
            "metrics_generated_timestamp_seconds",
            "When these figures were taken, in seconds since the epoch.",
            (),
            [((), m.generated_at.timestamp())],
        )


def exposition(metrics: StoreMetrics) -> bytes:
    """The snapshot in Prometheus's text format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(metrics))
    return generate_latest(registry)


GATEWAY_GAUGES = {
    "gateway_open_streams": "Log streams and long polls the gateway has open now.",
    "gateway_open_connections": "Connections the gateway has open now.",
    "gateway_busy_threads": "The gateway's threads at work now (the rest are idle), the"
    " calls to a registry or the scheduler included.",
    "gateway_registry_calls": "Calls to registries under way now ([gateway] max_registry_calls).",
    "gateway_scheduler_calls": "Calls to the scheduler under way now"
    " ([gateway] max_scheduler_calls).",
}


def gateway_exposition(store: str, values: Mapping[str, float]) -> bytes:
    """The gateway's own gauges (``GATEWAY_GAUGES``, by name), labelled with ``store`` as the
    store's series are."""
    registry = CollectorRegistry(auto_describe=False)

    class Gauges:
        def collect(self) -> Iterator[Metric]:
            for name, documentation in GATEWAY_GAUGES.items():
                family = GaugeMetricFamily(PREFIX + name, documentation, labels=["store"])
                family.add_metric([store], values[name])
                yield family

    registry.register(Gauges())
    return generate_latest(registry)
