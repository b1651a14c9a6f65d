"""``slurm-image metrics`` through the CLI's own entry point, with the fake scheduler shared
between commands: the text read back by ``prometheus_client``'s parser, the failure counter
moving after a refused import, the textfile replaced atomically, ``--json`` holding the same
numbers, and a ``--textfile`` that cannot be written refused before anything is created."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cli_site import CliSite, fake_scheduler
from metrics_support import expected_samples, node_exporter_merge, samples, series, stores
from publish_support import SOURCE, SOURCE_DIGEST, SQSH_BYTES, chain_json, inspection
from slurm_image.domain.job import JobState
from slurm_image.domain.paths import AttemptLayout

FAILED_IMPORTS = series("lifecycles_total", operation="import", outcome="failed")
PUBLISHED_IMPORTS = series("lifecycles_total", operation="import", outcome="published")
REFUSED_CHAIN = series("job_failures_total", operation="import", exit_code="79", state="FAILED")


class Site(CliSite):
    def submitted_import(self, name: str) -> tuple[str, str]:
        submitted = self.json("import", SOURCE, "--name", name, "--role", "client", "--force")
        return submitted["lifecycle_id"], submitted["job_id"]

    def published_import(self, name: str) -> None:
        lifecycle_id, job_id = self.submitted_import(name)
        attempt = AttemptLayout(str(self.root), lifecycle_id)
        Path(attempt.in_job("candidate.sqsh")).write_bytes(SQSH_BYTES)
        Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", SQSH_BYTES))
        Path(attempt.chain_record).write_bytes(chain_json(f"sha256:{SOURCE_DIGEST}"))
        Path(attempt.architecture_record).write_bytes(b"x86_64\n")
        self.scheduler.finish(job_id)
        self.json("publish", lifecycle_id)

    def metrics(self, *args: str) -> str:
        code, out, err = self.run("metrics", *args)
        assert code == 0, err
        return out


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> Site:
    root = tmp_path / "ws"
    root.mkdir(mode=0o700)
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        'arch = "x86_64"\n'
        '[submitter]\nkind = "fake"\n'
    )
    (tmp_path / "textfile").mkdir()
    return Site(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def test_the_textfile_is_read_by_prometheus_clients_parser(site: Site, tmp_path: Path) -> None:
    site.published_import("app")
    path = tmp_path / "textfile" / "slurm_image.prom"
    assert site.metrics("--textfile", str(path)) == ""
    text = path.read_text()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["slurm_image_aliases"].type == "gauge"
    assert families["slurm_image_lifecycles"].type == "counter"
    assert families["slurm_image_job_run_seconds"].type == "histogram"
    assert all(family.documentation for family in families.values())
    found = samples(text)
    assert found[series("aliases", role="client", architecture="x86_64")] == 1
    assert found[series("artifacts", referenced="true")] == 1
    assert found[series("artifacts_bytes", referenced="true")] == len(SQSH_BYTES)
    assert found[PUBLISHED_IMPORTS] == 1
    assert found[FAILED_IMPORTS] == 0
    assert found[series("attempts", state="submitted")] == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_the_failure_counter_moves_after_a_refused_import(site: Site, tmp_path: Path) -> None:
    site.published_import("app")
    path = tmp_path / "textfile" / "slurm_image.prom"
    site.metrics("--textfile", str(path))
    before = samples(path.read_text())
    assert before[FAILED_IMPORTS] == 0
    assert REFUSED_CHAIN not in before
    lifecycle_id, job_id = site.submitted_import("refused")
    site.scheduler.finish(job_id, 79)  # the job refused the registry's chain
    code, _, _ = site.run("wait", lifecycle_id)
    assert code == 4
    site.metrics("--textfile", str(path))
    after = samples(path.read_text())
    assert after[FAILED_IMPORTS] == 1
    assert after[REFUSED_CHAIN] == 1
    assert after[PUBLISHED_IMPORTS] == before[PUBLISHED_IMPORTS]
    assert after[series("history_events_total", event="job_failed")] == 1


def test_two_stores_textfiles_side_by_side_hold_no_series_twice(site: Site, tmp_path: Path) -> None:
    site.published_import("app")
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    profile = tmp_path / "other.toml"
    profile.write_text(
        (tmp_path / "slurm-image.toml").read_text().replace(str(site.root), str(other))
        + '[metrics]\nstore_name = "site-b"\n'
    )
    site.json("--profile", str(profile), "import", SOURCE, "--name", "b", "--role", "client")
    directory = tmp_path / "textfile"
    site.metrics("--textfile", str(directory / "a.prom"))
    code, _, err = site.run(
        "--profile", str(profile), "metrics", "--textfile", f"{directory}/b.prom"
    )
    assert code == 0, err
    texts = {path.name: path.read_text() for path in directory.glob("*.prom")}
    assert stores(texts["a.prom"]) == {str(site.root)}  # the workspace root by default
    assert stores(texts["b.prom"]) == {"site-b"}
    assert node_exporter_merge(texts) == []
    # the rule can fail: one store's figures twice, or a family whose help differs
    assert node_exporter_merge({"a.prom": texts["a.prom"], "copy.prom": texts["a.prom"]})
    changed = texts["b.prom"].replace("# HELP slurm_image_aliases ", "# HELP slurm_image_aliases x")
    assert node_exporter_merge({"a.prom": texts["a.prom"], "b.prom": changed})


def test_a_store_that_only_refused_has_a_textfile_beside_anothers_and_no_series_twice(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.published_import("app")
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    profile = tmp_path / "other.toml"
    profile.write_text(
        (tmp_path / "slurm-image.toml").read_text().replace(str(site.root), str(other))
        + '[metrics]\nstore_name = "site-b"\n'
    )
    monkeypatch.setenv("SLURM_IMAGE_POLICY__ALLOWED_REGISTRIES", '["registry.site.example"]')
    tag = "registry.example.org/team/app:1"  # refused before any registry is asked
    code, _, err = site.run(
        "--profile", str(profile), "import", tag, "--resolve", "--name", "b", "--role", "client"
    )  # the first request of a new store
    assert code == 2 and "policy.allowed_registries" in err
    directory = tmp_path / "textfile"
    site.metrics("--textfile", str(directory / "a.prom"))
    code, _, err = site.run(
        "--profile", str(profile), "metrics", "--textfile", f"{directory}/b.prom"
    )
    assert code == 0, err
    texts = {path.name: path.read_text() for path in directory.glob("*.prom")}
    assert stores(texts["b.prom"]) == {"site-b"}
    assert node_exporter_merge(texts) == []
    refused = series("refusals_total", rule="source_not_allowed")
    assert (samples(texts["a.prom"])[refused], samples(texts["b.prom"])[refused]) == (0, 1)
    assert samples(texts["b.prom"])[series("aliases", role="client", architecture="x86_64")] == 0


def test_refusals_are_counted_by_rule_and_a_cancel_past_the_product_as_cancelled(
    site: Site, tmp_path: Path
) -> None:
    site.published_import("app")
    lifecycle_id, job_id = site.submitted_import("stopped")
    site.scheduler.set_state(job_id, JobState.CANCELLED, exit_code=15)  # scancel
    site.json("status", lifecycle_id)
    profile = tmp_path / "slurm-image.toml"
    profile.write_text(
        profile.read_text() + '[policy]\nallowed_registries = ["registry.site.example"]\n'
    )
    assert site.run("import", SOURCE, "--name", "evil", "--role", "client")[0] == 2
    found = samples(site.metrics())
    assert found[series("refusals_total", rule="source_not_allowed")] == 1
    assert found[series("refusals_total", rule="signature_missing")] == 0
    assert found[series("lifecycles_total", operation="import", outcome="cancelled")] == 1
    assert found[FAILED_IMPORTS] == 0


def test_json_holds_the_numbers_of_the_textfile(site: Site, tmp_path: Path) -> None:
    site.published_import("app")
    lifecycle_id, job_id = site.submitted_import("refused")
    site.scheduler.finish(job_id, 79)
    site.run("wait", lifecycle_id)
    path = tmp_path / "textfile" / "slurm_image.prom"
    data = site.json("metrics", "--textfile", str(path))
    assert samples(path.read_text()) == expected_samples(data)
    printed = samples(site.metrics())  # stdout without --textfile: another run, another time
    expected = expected_samples(data)
    generated = series("metrics_generated_timestamp_seconds")
    assert printed.pop(generated) >= expected.pop(generated)
    assert printed == expected


def test_the_old_textfile_is_replaced_whole_or_kept_and_no_temporary_is_left(
    site: Site, tmp_path: Path
) -> None:
    path = tmp_path / "textfile" / "slurm_image.prom"
    path.write_text("stale 1\n")
    code, _, err = site.run("metrics", "--textfile", str(path))  # no store yet: a failed run
    assert code == 2, err
    assert path.read_text() == "stale 1\n"
    assert os.listdir(path.parent) == ["slurm_image.prom"]
    site.published_import("app")
    site.metrics("--textfile", str(path))
    assert "stale" not in path.read_text()
    assert "slurm_image_aliases" in path.read_text()
    assert os.listdir(path.parent) == ["slurm_image.prom"]


@pytest.mark.parametrize(
    "where", ["missing/slurm_image.prom", "textfile", "textfile/", "the-profile/x.prom"]
)
def test_a_textfile_that_cannot_be_written_exits_2_naming_the_option_and_creates_nothing(
    site: Site, tmp_path: Path, where: str
) -> None:
    (tmp_path / "the-profile").write_text("")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    code, out, err = site.run("metrics", "--textfile", f"{tmp_path}/{where}")
    assert code == 2
    assert out == ""
    assert err.startswith("slurm-image: error: --textfile: ")
    assert len(err.splitlines()) == 1
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_bad_textfile_is_refused_before_the_store_is_read(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_IMAGE_WORKSPACE_ROOT", f"{tmp_path}/no-such-workspace")
    code, _, err = site.run("metrics", "--textfile", f"{tmp_path}/missing/slurm_image.prom")
    assert code == 2
    assert "--textfile" in err
    code, _, err = site.run("metrics", "--textfile", f"{tmp_path}/textfile/slurm_image.prom")
    assert code == 2
    assert err.startswith(f"slurm-image: error: workspace_root: {tmp_path}/no-such-workspace")
    assert not (tmp_path / "textfile" / "slurm_image.prom").exists()


def test_a_textfile_directory_others_may_write_exits_2_naming_it_and_the_rule(
    site: Site, tmp_path: Path
) -> None:
    site.published_import("app")
    shared = tmp_path / "shared-textfile"
    shared.mkdir()
    shared.chmod(0o1777)  # a sticky directory anyone may add files to, as /tmp is
    path = shared / "slurm_image.prom"
    code, out, err = site.run("metrics", "--textfile", str(path))
    assert code == 2
    assert out == ""
    assert err.startswith(
        f"slurm-image: error: --textfile: {path}: its directory {shared} is writable by group or"
        " others, who could plant the file before you (or replace it) with figures of their own:"
    )
    assert len(err.splitlines()) == 1
    assert os.listdir(shared) == []
    shared.chmod(0o755)  # closed to others: the same command writes the file
    assert site.metrics("--textfile", str(path)) == ""
    assert "slurm_image_aliases" in path.read_text()
