"""The snapshot in Prometheus's text format (wire.metrics_text), read back with
``prometheus_client``'s own parser: every family named ``slurm_image_*`` with its HELP and
type, units in the names, and exactly the numbers of the JSON form."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from metrics_support import collect, event, expected_samples, samples, series
from publish_support import SQSH_BYTES, PublishLab
from slurm_image.application.metrics import StoreMetrics
from slurm_image.domain.layer_cache import CacheBound
from slurm_image.wire.metrics_text import exposition

A, B = (f"img-{n:032x}" for n in range(1, 3))

FAMILIES = {
    "slurm_image_aliases": "gauge",
    "slurm_image_aliases_unreadable": "gauge",
    "slurm_image_artifacts": "gauge",
    "slurm_image_artifacts_bytes": "gauge",
    "slurm_image_layer_cache_bytes": "gauge",
    "slurm_image_layer_cache_layers": "gauge",
    "slurm_image_layer_cache_max_bytes": "gauge",
    "slurm_image_attempts": "gauge",
    "slurm_image_history_events": "counter",
    "slurm_image_history_skipped_lines": "gauge",
    "slurm_image_lifecycles": "counter",
    "slurm_image_job_failures": "counter",
    "slurm_image_job_run_seconds": "histogram",
    "slurm_image_publish_latency_seconds": "histogram",
    "slurm_image_refusals": "counter",
    "slurm_image_metrics_generated_timestamp_seconds": "gauge",
}
"""The families as the parser names them (a counter without its ``_total``)."""


@pytest.fixture
def metrics(workspace_harness: Any, profile_for: Any, runtime_files: Any) -> StoreMetrics:
    lab = PublishLab(workspace_harness, profile_for, runtime_files)
    lab.finished(A, name="app", arch="x86_64")
    lab.publish(A)
    lab.submitted(B, name="next")
    cache = f"{workspace_harness.root}/images/layer-cache"
    workspace_harness.makedirs(cache)
    workspace_harness.write(f"{cache}/{1:064x}", b"x" * 100)
    return collect(
        lab,
        event("published", 1, operation="import", job_seconds=45.5, publish_latency_seconds=90.0),
        event("job_failed", 2, operation="import", exit_code=79, state="FAILED", job_seconds=3.0),
        event("job_failed", 3, operation="inspect", state="TIMEOUT"),
        event("cancelled", 4, operation="import"),
        event("refused", 5, rule="signature_missing", exit_code=10, reason="not signed"),
        event("refused", 6, rule="unauthenticated", exit_code=401, reason="a front end's"),
        unreadable_lines=1,
        cache=CacheBound(cache, 1 << 20),
    )


def parsed(text: str) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_the_text_is_read_by_prometheus_clients_parser_family_by_family(
    metrics: StoreMetrics,
) -> None:
    families = parsed(exposition(metrics).decode())
    assert {name: family.type for name, family in families.items()} == FAMILIES
    for family in families.values():
        assert family.documentation, family.name
    assert all(name.startswith("slurm_image_") for name in families)


def test_the_text_holds_exactly_the_numbers_of_the_json_form(metrics: StoreMetrics) -> None:
    assert samples(exposition(metrics).decode()) == expected_samples(metrics.as_dict())


def test_the_figures_read_back_are_the_stores(metrics: StoreMetrics) -> None:
    found = samples(exposition(metrics).decode())
    assert found[series("aliases", role="client", architecture="x86_64")] == 1
    assert found[series("aliases", role="serving", architecture="x86_64")] == 0
    assert found[series("artifacts_bytes", referenced="true")] == len(SQSH_BYTES)
    assert found[series("attempts", state="submitted")] == 2
    assert found[series("layer_cache_bytes", kind="layer")] == 100
    assert found[series("layer_cache_max_bytes")] == 1 << 20
    assert found[series("lifecycles_total", operation="import", outcome="failed")] == 1
    assert found[series("lifecycles_total", operation="inspect", outcome="failed")] == 1
    assert found[series("lifecycles_total", operation="import", outcome="cancelled")] == 1
    failures = series("job_failures_total", operation="import", exit_code="79", state="FAILED")
    assert found[failures] == 1
    timeout = series("job_failures_total", operation="inspect", exit_code=None, state="TIMEOUT")
    assert found[timeout] == 1
    run = {"operation": "import", "outcome": "published"}
    assert found[series("job_run_seconds_bucket", le="30.0", **run)] == 0
    assert found[series("job_run_seconds_bucket", le="60.0", **run)] == 1
    assert found[series("job_run_seconds_sum", **run)] == 45.5
    assert found[series("history_skipped_lines")] == 1
    assert found[series("refusals_total", rule="signature_missing")] == 1
    assert found[series("refusals_total", rule="source_not_allowed")] == 0  # every rule, zeros too
    assert found[series("refusals_total", rule="unauthenticated")] == 1  # a front end's own
    generated = found[series("metrics_generated_timestamp_seconds")]
    assert math.isclose(generated, metrics.generated_at.timestamp())


def test_every_series_names_the_store(metrics: StoreMetrics) -> None:
    text = exposition(replace(metrics, store="site-a")).decode()
    names = [
        sample.labels.get("store")
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
    assert names and set(names) == {"site-a"}


def test_a_layer_cache_left_out_has_no_family(metrics: StoreMetrics) -> None:
    families = parsed(exposition(replace(metrics, layer_cache=None)).decode())
    assert not [name for name in families if name.startswith("slurm_image_layer_cache")]
    assert "slurm_image_artifacts" in families


def test_each_exposition_has_its_own_registry(metrics: StoreMetrics) -> None:
    assert exposition(metrics) == exposition(metrics)  # nothing left registered between them
    assert b"slurm_image_" not in generate_latest(REGISTRY)
