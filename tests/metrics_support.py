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
    """Every sample of ``text`` by name and labels but ``store``, which every sample carries
    with one value (``stores``); no sample twice."""
    found: dict[SampleKey, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            assert "store" in labels, f"{sample.name} has no store label"
            del labels["store"]
            key = (sample.name, frozenset(labels.items()))
            assert key not in found, f"{key} twice"
            found[key] = sample.value
    assert len(stores(text)) <= 1
    return found


def stores(text: str) -> set[str]:
    """The values of the ``store`` label in ``text``."""
    return {
        sample.labels["store"]
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if "store" in sample.labels
    }


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
    for rule, count in data["refusals"].items():
        out[series("refusals_total", rule=rule)] = count
    generated = datetime.fromisoformat(data["generated_at"]).timestamp()
    out[series("metrics_generated_timestamp_seconds")] = generated
    return out


def node_exporter_merge(texts: dict[str, str]) -> list[str]:
    """The problems node_exporter's textfile collector finds in a directory of ``*.prom`` files
    (name -> text), as collector/textfile.go merges them: each file parsed on its own, then
    every family of one name across files is one family, so it must have one type and one help
    text (else "inconsistent metric help text", and client_golang's registry refuses another
    type), and no series (name and labels, a missing label as empty) may be there twice ("was
    collected before with the same name and label values"). No problem: an empty list."""
    problems: list[str] = []
    kinds: dict[str, tuple[str, str, str]] = {}
    seen: dict[tuple[str, frozenset[tuple[str, str]]], str] = {}
    for file, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            known = kinds.setdefault(family.name, (family.type, family.documentation, file))
            if known[:2] != (family.type, family.documentation):
                problems.append(
                    f"{family.name}: {file} has {family.type} {family.documentation!r},"
                    f" {known[2]} {known[0]} {known[1]!r}"
                )
            for sample in family.samples:
                key = (sample.name, frozenset(sample.labels.items()))
                if key in seen:
                    problems.append(f"{sample.name} {dict(sample.labels)}: {seen[key]} and {file}")
                seen.setdefault(key, file)
    return problems
