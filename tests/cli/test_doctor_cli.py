"""``slurm-image doctor``'s profile check: which file, which cluster, and why each was chosen.

The fake submitter never runs the tiny job, so these runs end at ``--timeout 1`` with exit 4;
the profile line is what is under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import run_cli

CATALOG = """\
default = "beta"
[clusters.alpha]
host_patterns = ["{pattern}"]
workspace_root = "{root}"
[clusters.alpha.image_build]
partition = "cpu"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
[clusters.alpha.submitter]
kind = "fake"
[clusters.beta]
workspace_root = "{root}"
[clusters.beta.image_build]
partition = "cpu"
cpus_per_task = 2
memory = "4G"
time_limit = "1:00:00"
[clusters.beta.submitter]
kind = "fake"
"""


def doctor(site: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = run_cli(*args, "--timeout", "1", "--json", cwd=site, env=env)
    assert done.returncode == 4, done.stdout + done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def profile_line(report: dict[str, object]) -> str:
    checks = report["checks"]
    assert isinstance(checks, list)
    assert checks[0]["name"] == "profile" and checks[0]["ok"] is True
    (job,) = [check for check in checks if check["name"] == "job"]
    assert job["detail"].endswith("cancelled")  # the job the fake never ran
    return str(checks[0]["detail"])


@pytest.mark.parametrize(
    ("pattern", "args", "words"),
    [
        ("*", [], "cluster alpha (this host matches '*')"),
        ("no-such-host-*", [], "cluster beta (no host pattern matched: the catalog's default)"),
        ("*", ["--cluster", "beta"], "cluster beta (--cluster)"),
    ],
)
def test_doctor_says_which_cluster_and_why(
    tmp_path: Path, pattern: str, args: list[str], words: str
) -> None:
    catalog = tmp_path / "catalog.toml"
    catalog.write_text(CATALOG.format(pattern=pattern, root=tmp_path / "ws"))
    (tmp_path / "ws").mkdir()
    line = profile_line(doctor(tmp_path, "--profile", str(catalog), *args, "doctor"))
    assert line.startswith(f"{catalog} (from --profile); {words}; profile sha256 ")


def test_doctor_says_which_file_and_why(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    text = CATALOG.format(pattern="*", root=tmp_path / "ws")
    (tmp_path / "slurm-image.toml").write_text(text)
    line = profile_line(doctor(tmp_path, "doctor"))
    assert line.startswith(f"{tmp_path}/slurm-image.toml (from the default in the working")
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(text)
    line = profile_line(doctor(tmp_path, "doctor", env={"SLURM_IMAGE_PROFILE": str(elsewhere)}))
    assert line.startswith(f"{elsewhere} (from $SLURM_IMAGE_PROFILE)")
