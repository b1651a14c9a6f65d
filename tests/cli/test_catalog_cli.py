"""publish, wait and the catalog through the CLI's own entry point, in this process, with the
fake scheduler shared between commands (a fresh process would not know its jobs)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from dependency_injector import providers

import slurm_image.composition.api as api
from cli_site import CliSite, fake_scheduler
from publish_support import SOURCE, SOURCE_DIGEST, SQSH_BYTES, chain_json, inspection
from slurm_image.adapters.memory import FakeSubmitter
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.store_layout import StoreLayout

SHA = hashlib.sha256(SQSH_BYTES).hexdigest()


class Site(CliSite):
    def __init__(self, root: Path, capsys: Any, scheduler: FakeSubmitter) -> None:
        super().__init__(root, capsys, scheduler)
        self.layout = StoreLayout(str(root))

    def finished_import(self, name: str = "app", sqsh: bytes = SQSH_BYTES) -> str:
        submitted = self.json("import", SOURCE, "--name", name, "--role", "client", "--force")
        lifecycle_id = submitted["lifecycle_id"]
        attempt = AttemptLayout(str(self.root), lifecycle_id)
        Path(attempt.in_job("candidate.sqsh")).write_bytes(sqsh)
        Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", sqsh))
        Path(attempt.chain_record).write_bytes(chain_json(f"sha256:{SOURCE_DIGEST}"))
        Path(attempt.architecture_record).write_bytes(b"x86_64\n")
        self.scheduler.finish(submitted["job_id"])
        return str(lifecycle_id)


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> Site:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(
        f'workspace_root = "{root}"\n'
        "[image_build]\n"
        'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
        'arch = "x86_64"\n'
        '[submitter]\nkind = "fake"\n'
    )
    return Site(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def test_publish_then_show_list_and_verify(site: Site) -> None:
    lifecycle_id = site.finished_import()
    published = site.json("publish", lifecycle_id)
    assert {"name", "path", "sqsh_sha256", "facts"} <= set(published)
    assert published["path"] == site.layout.artifact(SHA)
    shown = site.json("show", "app", "--verify")
    for key in ("name", "role", "path", "sqsh_sha256", "source", "source_digest", "facts"):
        assert shown[key] == published[key], key
    assert shown["verified"] is True
    listed = site.json("list")
    assert [image["name"] for image in listed["images"]] == ["app"]
    assert set(listed["images"][0]) == {
        "name",
        "architecture",
        "role",
        "path",
        "sqsh_sha256",
        "source",
        "source_digest",
        "published_at",
        "resolved_from",
        "signed_by",
        "owner",
        "group",
        "private",
        "architectures",
        "python_version",
        "vllm_version",
    }
    assert (listed["images"][0]["owner"], listed["images"][0]["group"]) == (None, None)
    code, out, _ = site.run("list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "ARCH", "ROLE", "SHA256", "PUBLISHED", "PATH"]
    assert row.split()[:3] == ["app", "x86_64", "client"]
    assert row.index(SHA[:12]) == header.index("SHA256")
    assert site.run("--quiet", "show", "app")[1] == f"{site.layout.artifact(SHA)}\n"


def test_show_prints_what_show_verify_and_publish_print(site: Site) -> None:
    published = site.json("publish", site.finished_import())
    verified = site.json("show", "app", "--verify")
    assert verified.pop("verified") is True
    shown = site.json("show", "app")
    assert shown.pop("architectures") == verified.pop("architectures") == ["x86_64"]
    assert shown == verified == published
    human = site.run("show", "app")[1].splitlines()
    assert human[0] == "app"
    assert site.run("show", "app", "--verify")[1].splitlines()[1:] == human[1:]
    assert any(line.split()[:2] == ["path", published["path"]] for line in human)
    stable = f"{site.layout.images}/by-name/x86_64/app.sqsh"
    assert shown["stable_path"] == stable
    assert any(line.split() == ["by", "name", stable] for line in human)


def test_show_of_a_damaged_record_exits_5_naming_the_record(site: Site) -> None:
    site.json("publish", site.finished_import())
    alias = Path(site.layout.alias("app"))
    document = json.loads(alias.read_text())
    document["entries"][0]["path"] = "images/elsewhere.sqsh"
    alias.write_text(json.dumps(document))
    for command in (("show", "app"), ("show", "app", "--verify")):
        code, out, err = site.run(*command)
        assert code == 5 and out == "", command
        assert err.startswith(f"slurm-image: error: {alias}: alias.entries.0.path: "), err
        assert len(err.splitlines()) == 1


def test_a_second_publish_without_replace_exits_6_and_unknown_alias_exits_2(site: Site) -> None:
    site.json("publish", site.finished_import())
    other = site.finished_import(sqsh=SQSH_BYTES + b"2")
    code, _, err = site.run("publish", other)
    assert code == 6 and "--replace" in err and len(err.splitlines()) == 1
    assert site.run("publish", other, "--replace")[0] == 0
    code, _, err = site.run("show", "nothing")
    assert code == 2 and err.startswith("slurm-image: error: name: no alias nothing")


def test_a_refused_result_exits_5(site: Site) -> None:
    lifecycle_id = site.finished_import()
    result = AttemptLayout(str(site.root), lifecycle_id).in_job("output/inspection.json")
    Path(result).write_bytes(b"{}")
    code, out, err = site.run("publish", lifecycle_id)
    assert code == 5 and out == "" and "nothing was published" in err
    assert site.json("list") == {"images": []}


def test_wait_reports_exit_codes_and_exits_4_when_a_job_failed(site: Site) -> None:
    good = site.finished_import()
    bad = site.json("import", SOURCE, "--name", "b", "--role", "client", "--force")
    site.scheduler.finish(bad["job_id"], 69)
    code, out, err = site.run("wait", good, bad["lifecycle_id"], "--json")
    assert code == 4, err
    states = {s["lifecycle_id"]: s for s in json.loads(out)["lifecycles"]}
    assert states[good]["state"] == "COMPLETED"
    assert states[bad["lifecycle_id"]]["exit_code"] == 69
    assert "no Python" in states[bad["lifecycle_id"]]["reason"]


def test_an_import_of_a_stored_source_is_answered_from_the_store(site: Site) -> None:
    site.json("publish", site.finished_import())
    jobs = len(site.scheduler.jobs)
    answered = site.json("import", SOURCE, "--name", "again", "--role", "client")
    assert answered["state"] == "PUBLISHED" and answered["from_store"] is True
    assert answered["path"] == site.layout.artifact(SHA)
    assert len(site.scheduler.jobs) == jobs
    other_role = site.json("import", SOURCE, "--name", "srv", "--role", "serving")
    assert other_role["state"] == "SUBMITTED"
    job = site.scheduler.job(other_role["job_id"])
    assert site.layout.artifact(SHA).encode() in job.script


def test_a_source_recorded_before_the_chain_runs_an_import_job_that_records_it(
    site: Site,
) -> None:
    site.json("publish", site.finished_import())
    source = Path(site.layout.source(SOURCE_DIGEST, "x86_64"))
    old = json.loads(source.read_text())
    del old["chain"], old["architecture"]
    source.unlink()
    Path(site.layout.source(SOURCE_DIGEST, None)).write_text(
        json.dumps({**old, "schema_version": 1})
    )
    assert site.json("show", "app")["chain"]["pinned"] == f"sha256:{SOURCE_DIGEST}"

    again = site.json("import", SOURCE, "--name", "again", "--role", "client")

    assert again["state"] == "SUBMITTED"  # a job, not the store's word
    attempt = AttemptLayout(str(site.root), again["lifecycle_id"])
    Path(attempt.in_job("candidate.sqsh")).write_bytes(SQSH_BYTES)
    Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", SQSH_BYTES))
    Path(attempt.chain_record).write_bytes(chain_json(f"sha256:{SOURCE_DIGEST}"))
    Path(attempt.architecture_record).write_bytes(b"x86_64\n")
    site.scheduler.finish(again["job_id"])
    published = site.json("publish", again["lifecycle_id"])
    assert published["chain"] == json.loads(source.read_text())["chain"]
    assert published["chain"]["manifest"] == f"sha256:{SOURCE_DIGEST}"
    answered = site.json("import", SOURCE, "--name", "third", "--role", "client")
    assert answered["from_store"] is True and answered["chain"] == published["chain"]


def test_path_prints_the_stable_path_that_follows_a_replace(site: Site) -> None:
    site.json("publish", site.finished_import())
    stable = f"{site.layout.images}/by-name/x86_64/app.sqsh"
    assert site.run("path", "app", "--arch", "x86_64") == (0, f"{stable}\n", "")
    assert site.run("path", "app", "--arch", "x86_64", "--pinned")[1] == (
        f"{site.layout.artifact(SHA)}\n"
    )
    assert site.json("path", "app", "--arch", "x86_64") == {
        "name": "app",
        "architecture": "x86_64",
        "path": stable,
        "pinned": site.layout.artifact(SHA),
    }
    assert Path(stable).read_bytes() == SQSH_BYTES
    site.json("publish", site.finished_import(sqsh=SQSH_BYTES + b" v2"), "--replace")
    assert site.run("path", "app", "--arch", "x86_64")[1] == f"{stable}\n"
    assert Path(stable).read_bytes() == SQSH_BYTES + b" v2"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["missing"], "name: no alias missing is published"),
        (["../app"], "name: "),
        (["--", "-x"], "name: "),
        (["app", "--arch", "sparc"], "arch: "),
        (["app", "--arch", "aarch64"], "arch: alias app has no image for aarch64"),
    ],
)
def test_path_of_an_unknown_alias_a_bad_name_or_architecture_exits_2_and_creates_nothing(
    site: Site, arguments: list[str], message: str
) -> None:
    site.json("publish", site.finished_import())
    before = sorted(str(path) for path in Path(site.layout.images).rglob("*"))
    code, out, err = site.run("path", *arguments)
    assert (code, out) == (2, "")
    assert err.startswith(f"slurm-image: error: {message}"), err
    assert sorted(str(path) for path in Path(site.layout.images).rglob("*")) == before


def test_cleanup_and_gc_through_the_cli(site: Site) -> None:
    lifecycle_id = site.finished_import()
    site.json("publish", lifecycle_id)
    site.json("unregister", "app")
    artifact = {"kind": "artifact", "path": site.layout.artifact(SHA), "bytes": len(SQSH_BYTES)}
    assert artifact not in site.json("gc", "--dry-run")["removed"]  # released within the grace
    with (site.root.parent / "slurm-image.toml").open("a") as profile:
        profile.write('[store]\nrelease_grace = "0s"\n')
    planned = site.json("gc", "--dry-run")
    assert artifact in planned["removed"]
    assert Path(site.layout.artifact(SHA)).exists()
    assert site.json("cleanup", lifecycle_id) == {"lifecycle_id": lifecycle_id}
    site.json("gc")
    assert not Path(site.layout.artifact(SHA)).exists()


def test_gc_names_the_layer_cache_blobs_it_removes_and_a_dry_run_keeps_them(site: Site) -> None:
    cache = Path(site.layout.images) / "layer-cache"
    cache.mkdir(parents=True, mode=0o700)
    old, recent = cache / ("1" * 64), cache / ("2" * 64)
    for path in (old, recent):
        path.write_bytes(b"layer")
    os.utime(old, (1, 1))  # used last in 1970

    planned = site.json("gc", "--dry-run")
    assert planned["removed"] == [{"kind": "layer", "path": str(old), "bytes": 5}]
    assert old.exists()
    done = site.json("gc")

    assert done["removed"] == [{"kind": "layer", "path": str(old), "bytes": 5}]
    assert sorted(path.name for path in cache.iterdir()) == [recent.name]


def _deep_tree(directory: str, depth: int) -> None:
    """``depth`` nested directories below ``directory``, as an image can leave in output/."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", 0o700, dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


@pytest.mark.parametrize("command", ["cleanup", "gc"])
def test_cleanup_and_gc_remove_an_attempt_holding_a_tree_3000_deep(
    site: Site, command: str
) -> None:
    lifecycle_id = site.finished_import()
    attempt = AttemptLayout(str(site.root), lifecycle_id)
    _deep_tree(attempt.in_job("output"), 3000)
    args = ["cleanup", lifecycle_id] if command == "cleanup" else ["gc", "--older-than", "0"]
    code, _, err = site.run(*args)
    assert (code, err) == (0, "")
    assert not Path(attempt.job_dir).exists()


def test_verbose_logs_each_step_with_ids_and_digests(site: Site) -> None:
    lifecycle_id = site.finished_import()
    code, out, err = site.run("--verbose", "--quiet", "publish", lifecycle_id)
    assert code == 0, err
    assert out == f"{site.layout.artifact(SHA)}\n"
    lines = err.splitlines()
    assert any(f"[{lifecycle_id}]" in line and SHA in line for line in lines), err
    assert all(line.startswith("slurm-image: [") for line in lines), err


def test_verbose_logs_a_submission_once_with_its_lifecycle_and_job(site: Site) -> None:
    code, out, err = site.run(
        "--verbose", "--json", "import", SOURCE, "--name", "v", "--role", "client", "--force"
    )
    assert code == 0, err
    submitted = json.loads(out)
    said = [line for line in err.splitlines() if f"as job {submitted['job_id']}" in line]
    assert said == [
        f"slurm-image: [{submitted['lifecycle_id']}] submitted {submitted['lifecycle_id']}"
        f" as job {submitted['job_id']} via fake"
    ], err


def test_import_and_its_json_are_importable_as_a_library() -> None:
    import slurm_image

    assert slurm_image.Lifecycles is api.Lifecycles
    with pytest.raises(AttributeError):
        _ = slurm_image.Nothing  # type: ignore[attr-defined]


class _Terminal:
    """A stderr that says it is a terminal and keeps what was written."""

    def __init__(self) -> None:
        self.text: list[str] = []

    def write(self, data: str) -> int:
        self.text.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("not a real terminal")


def test_wait_on_a_terminal_shows_one_progress_line_per_lifecycle(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    lifecycle_id = site.finished_import()
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code, out, _ = site.run("wait", lifecycle_id)
    assert code == 0
    shown = "".join(terminal.text)
    assert "LIFECYCLE" in shown and lifecycle_id in shown and "COMPLETED" in shown
    assert out.startswith(lifecycle_id) and "COMPLETED" in out


def test_wait_as_json_prints_only_the_final_result(site: Site, monkeypatch: Any) -> None:
    lifecycle_id = site.finished_import()
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    result = site.json("wait", lifecycle_id)
    assert result["lifecycles"][0]["state"] == "COMPLETED" and result["timed_out"] is False
    assert "LIFECYCLE" not in "".join(terminal.text)


def test_wait_timeout_exits_7_and_cancels_nothing(site: Site) -> None:
    submitted = site.json("import", SOURCE, "--name", "slow", "--role", "client", "--force")
    site.scheduler.start(submitted["job_id"])
    code, out, err = site.run("wait", submitted["lifecycle_id"], "--timeout", "0", "--json")
    assert code == 7, err
    assert json.loads(out)["timed_out"] is True
    assert err.startswith("slurm-image: error: timeout:")
    assert site.scheduler.calls["cancel"] == 0


def test_a_refused_submission_says_the_attempt_stays_staged_and_how_to_retry(
    site: Site,
) -> None:
    site.scheduler.fail_next("permanent")
    code, _, err = site.run("import", SOURCE, "--name", "x", "--role", "client", "--force")
    assert code == 3 and len(err.splitlines()) == 1
    assert "stays staged" in err and "slurm-image submit img-" in err


def _job_runs_while_waited_for(site: Site, monkeypatch: pytest.MonkeyPatch, exit_code: int) -> None:
    """While ``--wait`` sleeps, the fake job leaves what a real one would, then ends."""
    from slurm_image.application.wait import Wait

    def sleep(_: float) -> None:
        job = list(site.scheduler.jobs.values())[-1]
        job_dir = Path(job.spec.working_directory)
        (job_dir / "candidate.sqsh").write_bytes(SQSH_BYTES)
        (job_dir / "output" / "inspection.json").write_bytes(inspection("client", SQSH_BYTES))
        (job_dir / "chain.json").write_bytes(chain_json(f"sha256:{SOURCE_DIGEST}"))
        (job_dir / "architecture").write_bytes(b"x86_64\n")
        site.scheduler.finish(job.job_id, exit_code)

    build = api.build_container

    def with_fast_wait(profile: Any = None) -> Any:
        container = build(profile)
        container.wait.override(
            providers.Factory(Wait, observe=container.observe, clock=container.clock, sleep=sleep)
        )
        return container

    monkeypatch.setattr(api, "build_container", with_fast_wait)


def test_import_wait_stages_submits_waits_and_publishes(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    _job_runs_while_waited_for(site, monkeypatch, 0)
    published = site.json("import", SOURCE, "--name", "app", "--role", "client", "--wait")
    assert published["state"] == "PUBLISHED" and published["from_store"] is False
    assert published["path"] == site.layout.artifact(SHA) and published["job_id"]
    shown = site.json("show", "app")
    assert shown["sqsh_sha256"] == SHA
    assert (
        published["stable_path"]
        == shown["stable_path"]
        == site.layout.images + ("/by-name/x86_64/app.sqsh")
    )


def test_import_wait_answered_from_the_store_prints_the_stable_path_for_srun(site: Site) -> None:
    site.json("publish", site.finished_import())
    code, out, _ = site.run("import", SOURCE, "--name", "again", "--role", "client", "--wait")
    assert code == 0 and out.startswith("answered from the store (no job): again")
    stable = f"{site.layout.images}/by-name/x86_64/again.sqsh"
    assert any(line.split() == ["by", "name", stable] for line in out.splitlines()), out


def test_import_wait_of_a_failing_job_exits_4_and_publishes_nothing(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    _job_runs_while_waited_for(site, monkeypatch, 76)
    code, out, err = site.run("import", SOURCE, "--name", "app", "--role", "client", "--wait")
    assert code == 4 and out == ""
    assert "FAILED exit 76" in err and "status ID" in err
    assert site.json("list") == {"images": []}


@pytest.mark.parametrize("flag", ["--dry-run", "--no-submit"])
def test_wait_with_nothing_to_wait_for_exits_2(site: Site, flag: str) -> None:
    code, out, err = site.run("import", SOURCE, "--name", "a", "--role", "client", "--wait", flag)
    assert code == 2 and out == "" and err.startswith("slurm-image: error: wait: needs")
    assert not (site.root / "images").exists()


@pytest.mark.parametrize(
    ("arch", "rule"),
    [("arm64", "use 'aarch64'"), ("amd64", "use 'x86_64'"), ("i686", "must be one of")],
)
def test_an_architecture_enroot_does_not_take_exits_2_and_stages_nothing(
    site: Site, arch: str, rule: str
) -> None:
    code, _, err = site.run("import", SOURCE, "--name", "app", "--role", "client", "--arch", arch)
    assert code == 2
    assert "arch:" in err and rule in err
    assert not Path(site.layout.jobs).exists()
    code, _, err = site.run("show", "app", "--arch", arch)
    assert code == 2 and "arch:" in err and rule in err


def test_show_of_an_architecture_the_alias_lacks_exits_2_naming_what_it_has(site: Site) -> None:
    site.json("publish", site.finished_import())
    for verify in ((), ("--verify",)):
        code, out, err = site.run("show", "app", "--arch", "aarch64", *verify)
        assert (code, out) == (2, "")
        assert "no image for aarch64" in err and "has: x86_64" in err
    shown = site.json("show", "app", "--arch", "x86_64", "--verify")
    assert (shown["architecture"], shown["architectures"]) == ("x86_64", ["x86_64"])


def test_the_profiles_architecture_is_planned_and_the_option_overrides_it(site: Site) -> None:
    planned = site.json("import", SOURCE, "--name", "app", "--role", "client", "--dry-run")
    assert planned["plan"]["architecture"] == "x86_64"
    asked = site.json(
        "import", SOURCE, "--name", "app", "--role", "client", "--dry-run", "--arch", "aarch64"
    )
    assert asked["plan"]["architecture"] == "aarch64"
    assert asked["plan"]["request"]["architecture"] == "aarch64"


def test_the_stable_paths_check_finds_a_link_missing_or_naming_another_image(site: Site) -> None:
    from slurm_image.adapters.local_store import LocalStore
    from slurm_image.application.catalog_reader import CatalogReader, StablePathsChecked

    reader = CatalogReader(LocalStore.reader(root=str(site.root)))
    assert reader.stable_paths_checked() == StablePathsChecked(0, ())
    site.json("publish", site.finished_import())
    assert reader.stable_paths_checked() == StablePathsChecked(1, ())
    link = Path(f"{site.layout.images}/by-name/x86_64/app.sqsh")
    link.unlink()
    assert reader.stable_paths_checked() == StablePathsChecked(1, (str(link),))
    link.symlink_to("../../artifacts/" + "0" * 64 + ".sqsh")
    assert reader.stable_paths_checked() == StablePathsChecked(1, (str(link),))
    site.json("gc")
    assert reader.stable_paths_checked() == StablePathsChecked(1, ())
