"""A profile that cannot be used — missing, a bad value (among them a REST API version the adapter
does not serve), a catalog where no cluster matches this
host, an unknown ``--cluster``, a value TOML allows and Python cannot read (nesting too deep, an
integer of thousands of digits) — is one clear line and exit 2 for every command that reads one,
never a traceback; ``doctor`` reports it as its failed ``profile`` check, also exiting 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import run_cli

SOURCE = "registry.example.org/team/app:1.0@sha256:" + "b" * 64
ID = "img-" + "0" * 32

PROFILE = """\
workspace_root = "{root}"
[image_build]
partition = "cpu"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
[submitter]
kind = "fake"
"""

CATALOG = """\
[clusters.alpha]
host_patterns = ["no-such-login-*.example.org"]
workspace_root = "{root}"
[clusters.alpha.image_build]
partition = "cpu"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
"""

COMMANDS = {
    "import": ["import", SOURCE, "--name", "app", "--role", "client"],
    "import --dry-run": ["import", SOURCE, "--name", "app", "--role", "client", "--dry-run"],
    "inspect": ["inspect", "/data/app.sqsh", "--name", "app", "--role", "client"],
    "submit": ["submit", ID],
    "status": ["status", ID],
    "cancel": ["cancel", ID],
}


def run(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=site)


def write_site(tmp_path: Path, case: str) -> list[str]:
    """The profile of ``case`` in ``tmp_path``; returns the global options that select it."""
    root = tmp_path / "ws"
    root.mkdir()
    profile = tmp_path / "site.toml"
    if case == "missing":
        return ["--profile", str(tmp_path / "absent.toml")]
    if case == "bad value":
        profile.write_text(PROFILE.format(root=root).replace('"4G"', '"4 GB"'))
    elif case == "an API version the adapter does not serve":
        rest = (
            'kind = "rest"\n[submitter.rest]\nurl = "unix:///no/such.sock"\napi_version = "v0.0.39"'
        )
        profile.write_text(PROFILE.format(root=root).replace('kind = "fake"', rest))
    elif case == "a layer cache that is no path":
        profile.write_text(PROFILE.format(root=root) + '[enroot]\nlayer_cache = "cache"\n')
    elif case == "a layer cache bound of no size":
        profile.write_text(PROFILE.format(root=root) + '[enroot]\nlayer_cache_max = "lots"\n')
    elif case == "no cluster matches this host":
        profile.write_text(CATALOG.format(root=root))
    elif case == "unknown cluster":
        profile.write_text(CATALOG.format(root=root))
        return ["--profile", str(profile), "--cluster", "gamma"]
    return ["--profile", str(profile)]


CASES = {
    "missing": ("profile", "no profile file at"),
    "bad value": ("image_build.memory", "must match"),
    "an API version the adapter does not serve": (
        "submitter.rest.api_version",
        'must be "auto" or one of v0.0.38, v0.0.40, v0.0.41, v0.0.42, v0.0.43, v0.0.44, v0.0.45',
    ),
    "a layer cache that is no path": ("enroot.layer_cache", "must be an absolute path"),
    "a layer cache bound of no size": ("enroot.layer_cache_max", "must match ^[1-9][0-9]*[KMGT]$"),
    "no cluster matches this host": ("cluster", "no cluster matches host"),
    "unknown cluster": ("cluster", "'gamma' is not in the catalog"),
}


def snapshot(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", COMMANDS)
def test_an_unusable_profile_is_one_line_and_exit_2(
    tmp_path: Path, case: str, command: str
) -> None:
    options = write_site(tmp_path, case)
    before = snapshot(tmp_path)
    done = run(tmp_path, *options, *COMMANDS[command])
    field, words = CASES[case]
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"slurm-image: error: {field}: ")
    assert words in lines[0]
    assert "Traceback" not in done.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("case", CASES)
def test_doctor_reports_an_unusable_profile_as_its_failed_first_check(
    tmp_path: Path, case: str
) -> None:
    options = write_site(tmp_path, case)
    before = snapshot(tmp_path)
    field, words = CASES[case]
    done = run(tmp_path, *options, "doctor")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == ""
    first, *rest = done.stdout.splitlines()
    assert first.split()[:3] == ["FAIL", "profile", f"{field}:"]
    assert words in first
    assert rest and all(line.endswith("not run: no usable profile") for line in rest)
    report = json.loads(run(tmp_path, *options, "doctor", "--json").stdout)
    assert report["ok"] is False
    assert report["checks"][0]["name"] == "profile"
    assert report["checks"][0]["detail"].startswith(f"{field}: ")
    assert report["enroot_version"] is None
    assert snapshot(tmp_path) == before


# -- values TOML allows and Python cannot read ------------------------------------------

DEEP = "x = " + "[" * 3000 + "]" * 3000 + "\n"
DEEP_TABLES = "x = " + "{ a = " * 3000 + "1" + " }" * 3000 + "\n"
DIGITS = "9" * 5000
OVERRIDE = "SLURM_IMAGE_IMAGE_BUILD__CPUS_PER_TASK"
SITE = '[submitter]\nkind = "mysite"\n[submitter.mysite]\nx = '

UNREADABLE = {
    "a profile nested 3000 deep in arrays": (DEEP + "{profile}", {}, "profile", "nested too deep"),
    "a profile nested 3000 deep in tables": (
        DEEP_TABLES + "{profile}",
        {},
        "profile",
        "nested too deep",
    ),
    "a 5000-digit integer in the profile": (
        "{profile}",
        {},
        "profile",
        "an integer of more than 4300 digits",
    ),
    "a 5000-digit integer in an override": (
        "{profile}",
        {OVERRIDE: DIGITS},
        OVERRIDE,
        "an integer of more than 4300 digits",
    ),
    "an override nested 3000 deep": (
        "{profile}",
        {OVERRIDE: "[" * 3000 + "]" * 3000},
        OVERRIDE,
        "nested too deep",
    ),
    "a timeout too large for a float": (
        "{profile}[submitter.sbatch]\ntimeout_s = " + "9" * 400 + "\n",
        {},
        "submitter.sbatch.timeout_s",
        "less than or equal to 3600",
    ),
    "site settings nested 300 deep": (
        "{site}" + "[" * 300 + "]" * 300 + "\n",
        {},
        "submitter",
        "nested deeper than 32 levels",
    ),
    "a 5000-bit integer in site settings": (
        "{site}0x" + "f" * 1250 + "\n",
        {},
        "submitter",
        "an integer of 64 bits",
    ),
}
FILE_LEVEL = [case for case, (_, env, field, _) in UNREADABLE.items() if field == "profile"]
READS = {
    **{name: COMMANDS[name] for name in ("import --dry-run", "submit", "status")},
    "gc": ["gc", "--dry-run"],
}


def _unreadable_site(tmp_path: Path, case: str) -> tuple[list[str], dict[str, str]]:
    template, env, _, _ = UNREADABLE[case]
    root = tmp_path / "ws"
    root.mkdir()
    profile = PROFILE.format(root=root)
    if case == "a 5000-digit integer in the profile":
        profile = profile.replace("cpus_per_task = 2", f"cpus_per_task = {DIGITS}")
    site = profile.replace('[submitter]\nkind = "fake"\n', SITE)
    text = template.replace("{profile}", profile).replace("{site}", site)
    (tmp_path / "site.toml").write_text(text)
    return ["--profile", str(tmp_path / "site.toml")], env


def _refused(done: subprocess.CompletedProcess[str], field: str, words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"slurm-image: error: {field}: ")
    assert words in lines[0]


@pytest.mark.parametrize("command", READS)
@pytest.mark.parametrize("case", UNREADABLE)
def test_a_value_python_cannot_read_is_exit_2_naming_the_field(
    tmp_path: Path, case: str, command: str
) -> None:
    options, env = _unreadable_site(tmp_path, case)
    before = snapshot(tmp_path)
    done = run_cli(*options, *READS[command], cwd=tmp_path, env=env)
    _refused(done, *UNREADABLE[case][2:])
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", [["show", "app"], ["list"]])
@pytest.mark.parametrize("case", FILE_LEVEL)
def test_the_catalog_reads_refuse_an_unreadable_profile_alike(
    tmp_path: Path, case: str, command: list[str]
) -> None:
    options, env = _unreadable_site(tmp_path, case)
    before = snapshot(tmp_path)
    _refused(run_cli(*options, *command, cwd=tmp_path, env=env), *UNREADABLE[case][2:])
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("age", ["99999999999999d", DIGITS, "36501d"])
def test_gc_refuses_an_age_beyond_a_century_naming_the_option(tmp_path: Path, age: str) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "site.toml").write_text(PROFILE.format(root=tmp_path / "ws"))
    before = snapshot(tmp_path)
    done = run_cli(
        "--profile", str(tmp_path / "site.toml"), "gc", "--older-than", age, cwd=tmp_path
    )
    _refused(done, "older_than", "must be at most 36500 days")
    assert snapshot(tmp_path) == before
