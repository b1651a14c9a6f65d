"""``history`` through the CLI's own entry point, in this process, with the fake scheduler shared
between commands: what the commands record, and how ``history`` prints and filters it."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cli_site import CliSite, fake_scheduler
from publish_support import SOURCE, SOURCE_DIGEST, SQSH_BYTES, chain_json, inspection
from slurm_image.adapters.memory import FakeClock
from slurm_image.domain.paths import AttemptLayout
from slurm_image.domain.store_layout import StoreLayout

SHA = hashlib.sha256(SQSH_BYTES).hexdigest()
OTHER = SQSH_BYTES + b" other"
OTHER_SHA = hashlib.sha256(OTHER).hexdigest()
ME = (pwd.getpwuid(os.getuid()).pw_name, os.getuid(), socket.gethostname())


class Site(CliSite):
    def __init__(self, root: Path, capsys: Any, scheduler: Any) -> None:
        super().__init__(root, capsys, scheduler)
        self.layout = StoreLayout(str(root))

    def submitted(self, name: str = "app") -> dict[str, Any]:
        found: dict[str, Any] = self.json(
            "import", SOURCE, "--name", name, "--role", "client", "--force"
        )
        return found

    def finished_import(self, name: str = "app", sqsh: bytes = SQSH_BYTES) -> str:
        return self.finish_import(self.submitted(name), sqsh)

    def finish_import(self, submitted: dict[str, Any], sqsh: bytes = SQSH_BYTES) -> str:
        attempt = AttemptLayout(str(self.root), submitted["lifecycle_id"])
        Path(attempt.in_job("candidate.sqsh")).write_bytes(sqsh)
        Path(attempt.in_job("output/inspection.json")).write_bytes(inspection("client", sqsh))
        Path(attempt.chain_record).write_bytes(chain_json(f"sha256:{SOURCE_DIGEST}"))
        Path(attempt.architecture_record).write_bytes(b"x86_64\n")
        self.scheduler.finish(submitted["job_id"])
        return str(submitted["lifecycle_id"])

    def events(self, *args: str) -> list[dict[str, Any]]:
        found = self.json("history", *args)
        assert found["skipped"] == 0
        events: list[dict[str, Any]] = found["events"]
        return events

    def month_file(self) -> Path:
        (name,) = os.listdir(self.layout.history)
        return Path(self.layout.history) / name


PROFILE = (
    'workspace_root = "{root}"\n'
    "[image_build]\n"
    'partition = "cpu"\ncpus_per_task = 2\nmemory = "4G"\ntime_limit = "1:00:00"\n'
    'arch = "x86_64"\n'
    '[submitter]\nkind = "fake"\n'
)


@pytest.fixture
def site(tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> Site:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(PROFILE.format(root=root))
    return Site(root, capsys, fake_scheduler(tmp_path, monkeypatch))


def test_an_empty_history_in_every_form(site: Site) -> None:
    assert site.json("history") == {"events": [], "skipped": 0}
    assert site.run("history") == (0, "no events recorded\n", "")
    assert site.run("--quiet", "history") == (0, "", "")
    assert not Path(site.layout.history).exists()  # reading creates nothing


def test_each_command_that_changes_the_store_is_recorded_in_order(site: Site) -> None:
    first = site.finished_import()
    site.json("publish", first)
    second = site.finished_import(sqsh=OTHER)
    site.json("publish", second, "--replace")
    failed = site.submitted("broken")
    site.scheduler.finish(failed["job_id"], 79)
    site.json("status", failed["lifecycle_id"])
    site.json("status", failed["lifecycle_id"])  # once, however often observed
    cancelled = site.submitted("stopped")
    site.json("cancel", cancelled["lifecycle_id"])
    site.json("unregister", "app")
    with (site.root.parent / "slurm-image.toml").open("a") as profile:
        profile.write('[store]\nrelease_grace = "0s"\n')  # no grace: gc takes both artifacts
    site.json("gc")

    events = site.events()
    assert [(e["event"], e["alias"]) for e in events] == [
        ("published", "app"),
        ("replaced", "app"),
        ("job_failed", "broken"),
        ("cancelled", "stopped"),
        ("unregistered", "app"),
        ("gc_artifact", None),
        ("gc_artifact", None),
        ("gc_removed", None),  # their source record
    ]
    assert all((e["user"], e["uid"], e["host"]) == ME for e in events)
    published, replaced, job_failed, stopped, unregistered = events[:5]
    assert (published["lifecycle_id"], published["artifact"]) == (first, SHA)
    assert published["source_digest"] == f"sha256:{SOURCE_DIGEST}"
    assert (replaced["lifecycle_id"], replaced["artifact"]) == (second, OTHER_SHA)
    assert replaced["previous_artifact"] == SHA
    assert (job_failed["job_id"], job_failed["exit_code"], job_failed["state"]) == (
        failed["job_id"],
        79,
        "FAILED",
    )
    assert (stopped["job_id"], stopped["state"]) == (cancelled["job_id"], "CANCELLED")
    assert (unregistered["architecture"], unregistered["artifact"]) == ("x86_64", OTHER_SHA)
    assert {e["artifact"] for e in events[5:7]} == {SHA, OTHER_SHA}
    assert {e["bytes"] for e in events[5:7]} == {len(SQSH_BYTES), len(OTHER)}
    assert (events[7]["removed"], events[7]["count"]) == ("source", 1)
    assert set(events[0]) == {
        "schema_version",
        "event",
        "time",
        "user",
        "uid",
        "host",
        "lifecycle_id",
        "job_id",
        "alias",
        "architecture",
        "operation",
        "role",
        "source_digest",
        "artifact",
        "previous_artifact",
        "exit_code",
        "state",
        "job_seconds",
        "publish_latency_seconds",
        "recovered",
        "rule",
        "source",
        "reason",
        "removed",
        "count",
        "bytes",
        "group",
        "private",
    }
    assert events[0]["schema_version"] == 3
    assert (events[0]["group"], events[0]["private"]) == (None, None), "a public image's"


def test_status_and_show_print_when_the_job_ran_and_the_event_how_long(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "slurm-image.toml").write_text(PROFILE.format(root=root))
    clock = FakeClock(datetime(2026, 1, 31, 12, tzinfo=UTC))
    site = Site(root, capsys, fake_scheduler(tmp_path, monkeypatch, clock))
    submitted = site.submitted()
    (queued,) = site.json("status", submitted["lifecycle_id"])["lifecycles"]
    assert (queued["started_at"], queued["ended_at"], queued["job_seconds"]) == (None, None, None)
    site.scheduler.start(submitted["job_id"])
    clock.advance(timedelta(seconds=95))
    lifecycle_id = site.finish_import(submitted)
    (done,) = site.json("status", lifecycle_id)["lifecycles"]
    assert (done["started_at"], done["ended_at"], done["job_seconds"]) == (
        "2026-01-31T12:00:00.000000Z",
        "2026-01-31T12:01:35.000000Z",
        95.0,
    )
    site.json("publish", lifecycle_id)
    shown = site.json("show", "app")
    assert shown["job"] == {
        "job_id": submitted["job_id"],
        "started_at": "2026-01-31T12:00:00.000000Z",
        "ended_at": "2026-01-31T12:01:35.000000Z",
    }
    (published,) = site.events()
    assert (published["event"], published["job_seconds"]) == ("published", 95.0)
    answered = site.json("import", SOURCE, "--name", "again", "--role", "client")
    assert answered["from_store"] is True and answered["job"] is None  # no job ran


def test_the_human_form_is_one_row_per_event_newest_last(site: Site) -> None:
    site.json("publish", site.finished_import())
    site.json("publish", site.finished_import(sqsh=OTHER), "--replace")
    failed = site.submitted("broken")
    site.scheduler.finish(failed["job_id"], 79)
    site.json("status", failed["lifecycle_id"])
    code, out, err = site.run("history")
    assert (code, err) == (0, "")
    header, *rows = out.splitlines()
    assert header.split() == [
        "TIME",
        "EVENT",
        "ALIAS",
        "BY",
        "LIFECYCLE",
        "JOB",
        "ARTIFACT",
        "EXIT",
    ]
    assert [row.split()[1:3] for row in rows] == [
        ["published", "app/x86_64"],
        ["replaced", "app/x86_64"],
        ["job_failed", "broken/x86_64"],
    ]
    assert f"{ME[0]}@{ME[2]}" in rows[0]
    assert f"{OTHER_SHA[:12]} (was {SHA[:12]})" in rows[1]
    assert rows[2].rstrip().endswith(" 79") and failed["job_id"] in rows[2].split()
    assert all(row.split()[0].endswith("Z") for row in rows)


def test_name_and_since_filter_and_quiet_prints_the_lines_as_stored(site: Site) -> None:
    site.json("publish", site.finished_import("one"))
    site.json("publish", site.finished_import("two", sqsh=OTHER))
    assert [e["alias"] for e in site.events("one")] == ["one"]
    assert site.events("three") == []
    assert [e["alias"] for e in site.events("--since", "2000-01-01")] == ["one", "two"]
    assert site.events("--since", "2999-12-31T23:59:59+02:00") == []
    code, out, _ = site.run("--quiet", "history", "two")
    assert code == 0
    assert out.encode() == site.month_file().read_bytes().splitlines(keepends=True)[1]


@pytest.mark.parametrize("since", ["yesterday", "2026-02-30", "03/01/2026", ""])
def test_a_bad_since_exits_2_naming_the_option_and_its_rule(site: Site, since: str) -> None:
    code, out, err = site.run("history", "--since", since)
    assert (code, out) == (2, "")
    assert err.startswith("slurm-image: error: --since: must be an ISO 8601 date")
    assert len(err.splitlines()) == 1


def test_a_refusal_on_the_sites_word_is_recorded_and_a_dry_run_is_not(
    site: Site, tmp_path: Path
) -> None:
    site.submitted("fine")  # a store
    profile = tmp_path / "slurm-image.toml"
    strict = '[policy]\nallowed_registries = ["registry.site.example"]\n'
    profile.write_text(profile.read_text() + strict)
    asked = ("import", SOURCE, "--name", "evil", "--role", "client")
    code, out, err = site.run(*asked, "--dry-run")
    assert (code, out) == (2, "") and "policy.allowed_registries" in err
    assert site.events() == []  # a dry run attempted nothing
    code, _, err = site.run(*asked)
    assert code == 2 and len(err.splitlines()) == 1, err  # the refusal alone, no warning
    (refused,) = site.events()
    assert (refused["event"], refused["rule"], refused["exit_code"]) == (
        "refused",
        "source_not_allowed",
        2,
    )
    assert (refused["source"], refused["alias"]) == (SOURCE, "evil")
    assert refused["reason"] == err.removeprefix("slurm-image: error: ").strip()
    assert (refused["user"], refused["uid"], refused["host"]) == ME
    assert refused["lifecycle_id"] is None  # nothing was staged


def test_an_inspection_without_a_signature_to_check_is_a_refusal_too(
    site: Site, tmp_path: Path
) -> None:
    key = tmp_path / "site.pub"
    key.write_text("an inspect reads no key\n")
    profile = tmp_path / "slurm-image.toml"
    site.submitted("fine")
    profile.write_text(
        profile.read_text() + f'[policy]\nrequire_signature = true\nkeys = ["{key}"]\n'
    )
    image = tmp_path / "image.sqsh"
    image.write_bytes(b"hsqs")
    code, _, err = site.run("inspect", str(image), "--name", "local", "--role", "serving")
    assert code == 10, err
    (refused,) = site.events()
    assert (refused["rule"], refused["exit_code"], refused["source"]) == (
        "signature_missing",
        10,
        str(image),
    )


def test_a_bad_name_exits_2(site: Site) -> None:
    code, out, err = site.run("history", "../aliases")
    assert (code, out) == (2, "")
    assert err.startswith("slurm-image: error: name: must match")


def test_a_torn_last_line_is_skipped_and_counted(site: Site) -> None:
    site.json("publish", site.finished_import())
    with site.month_file().open("ab") as history:
        history.write(b'{"event": "publ')
    read = site.json("history")
    assert [e["event"] for e in read["events"]] == ["published"] and read["skipped"] == 1
    code, out, _ = site.run("history")
    assert code == 0 and out.endswith("(1 lines were no event: skipped)\n")


def test_a_symlinked_history_exits_5_naming_it(site: Site, tmp_path: Path) -> None:
    site.json("publish", site.finished_import())
    elsewhere = tmp_path / "elsewhere"
    Path(site.layout.history).rename(elsewhere)
    Path(site.layout.history).symlink_to(elsewhere)
    code, out, err = site.run("history")
    assert (code, out) == (5, "")
    assert err.startswith(f"slurm-image: error: {site.layout.history}: ")


def test_a_change_stands_with_a_warning_when_its_event_cannot_be_appended(site: Site) -> None:
    Path(site.layout.images).mkdir(mode=0o755)
    Path(site.layout.history).write_bytes(b"not a directory")
    lifecycle_id = site.finished_import()
    code, out, err = site.run("--json", "publish", lifecycle_id)
    assert code == 0
    assert json.loads(out)["sqsh_sha256"] == SHA
    assert "the store's history misses this published event (app)" in err
    assert site.layout.history in err
    assert site.json("show", "app")["sqsh_sha256"] == SHA
