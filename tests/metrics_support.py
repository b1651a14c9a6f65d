"""Builders for the metrics tests: a snapshot of a ``PublishLab``'s store with events in its
history, and the samples of Prometheus's text as ``prometheus_client`` reads them back, or as
the JSON form says they must be."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from publish_support import PublishLab, history_for
from slurm_image.application.metrics import CollectMetrics, StoreMetrics
from slurm_image.domain.history import HistoryEvent, month_file
from slurm_image.domain.layer_cache import CacheBound

START = datetime(2026, 3, 1, tzinfo=UTC)


def event(kind: str, minutes: int = 0, **fields: Any) -> HistoryEvent:
    return HistoryEvent.model_validate(
        {
            "event": kind,
            "time": START + timedelta(minutes=minutes),
            "user": "alice",
            "uid": 1000,
            "host": "login1",
            **fields,
        }
    )


def collect(
    lab: PublishLab,
    *events: HistoryEvent,
    unreadable_lines: int = 0,
    cache: CacheBound | None = None,
) -> StoreMetrics:
    """The snapshot of ``lab``'s store after appending ``events`` to its history (through the
    store's own History adapter) and ``unreadable_lines`` lines that are no event."""
    writer = history_for(lab.harness, lab.store, lab.locks)
    for item in events:
        writer.append(item)
    for _ in range(unreadable_lines):
        lab.harness.append(lab.layout.history_file(month_file(START)), b"no event\n")
    reader = history_for(lab.harness, lab.store, None)
    return CollectMetrics(lab.store, reader, lab.clock)(layer_cache=cache)


SampleKey = tuple[str, frozenset[tuple[str, str]]]


def samples(text: str) -> dict[SampleKey, float]:
    found: dict[SampleKey, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in found, f"{key} twice"
            found[key] = sample.value
    return found


def series(name: str, **labels: object) -> SampleKey:
    text = {label: "unknown" if value is None else str(value) for label, value in labels.items()}
    return (f"slurm_image_{name}", frozenset(text.items()))


def expected_samples(data: dict[str, Any]) -> dict[SampleKey, float]:
    """The samples the text must hold, derived from the JSON form alone."""
    out: dict[SampleKey, float] = {}
    for item in data["aliases"]:
        labels = {"role": item["role"], "architecture": item["architecture"]}
        out[series("aliases", **labels)] = item["entries"]
    out[series("aliases_unreadable")] = data["aliases_unreadable"]
    for item in data["artifacts"]:
        referenced = "true" if item["referenced"] else "false"
        out[series("artifacts", referenced=referenced)] = item["count"]
        out[series("artifacts_bytes", referenced=referenced)] = item["bytes"]
    cache = data["layer_cache"]
    if cache is not None:
        for kind, size in cache["bytes"].items():
            out[series("layer_cache_bytes", kind=kind)] = size
        out[series("layer_cache_layers")] = cache["layers"]
        out[series("layer_cache_max_bytes")] = cache["max_bytes"]
    for state, count in data["attempts"].items():
        out[series("attempts", state=state)] = count
    for kind, count in data["history"]["events"].items():
        out[series("history_events_total", event=kind)] = count
    out[series("history_skipped_lines")] = data["history"]["skipped_lines"]
    for item in data["lifecycles"]:
        labels = {"operation": item["operation"], "outcome": item["outcome"]}
        out[series("lifecycles_total", **labels)] = item["count"]
    for item in data["job_failures"]:
        labels = {key: item[key] for key in ("operation", "exit_code", "state")}
        out[series("job_failures_total", **labels)] = item["count"]
    for name, keys in (
        ("job_run_seconds", ("operation", "outcome")),
        ("publish_latency_seconds", ("operation",)),
    ):
        for item in data[name]:
            labels = {key: item[key] for key in keys}
            for bucket in item["buckets"]:
                out[series(f"{name}_bucket", le=float(bucket["le"]), **labels)] = bucket["count"]
            out[series(f"{name}_bucket", le="+Inf", **labels)] = item["count"]
            out[series(f"{name}_count", **labels)] = item["count"]
            out[series(f"{name}_sum", **labels)] = item["sum"]
    generated = datetime.fromisoformat(data["generated_at"]).timestamp()
    out[series("metrics_generated_timestamp_seconds")] = generated
    return out
