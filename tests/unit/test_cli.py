"""The real `slurm-image` console entry, run as a subprocess in a scratch directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import DIGEST, HEX, PYTORCH, PYTORCH_URI

SRC = Path(__file__).resolve().parents[2] / ".pkg"  # the one package, slurm_image
CONSOLE = Path(sys.executable).with_name("slurm-image")

PROFILE_TOML = """\
workspace_root = "{root}"

[image_build]
partition = "cpu"
cpus_per_task = 4
memory = "16G"
time_limit = "1:00:00"
"""


def entry() -> list[str]:
    """The installed console script when there is one, else the module it points at."""
    if CONSOLE.exists():
        return [str(CONSOLE)]
    return [sys.executable, "-m", "slurm_image.composition"]


Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    def invoke(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        environ = {
            key: value for key, value in os.environ.items() if not key.startswith("SLURM_IMAGE_")
        }
        environ.update({"PYTHONPATH": str(SRC), "HOME": str(tmp_path), **(env or {})})
        return subprocess.run(
            [*entry(), *args],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    return invoke


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def profile(tmp_path: Path, workspace: Path) -> Path:
    path = tmp_path / "site.toml"
    path.write_text(PROFILE_TOML.format(root=workspace))
    return path


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(path.relative_to(root)): (path.lstat().st_mode, path.lstat().st_mtime_ns)
        for path in root.rglob("*")
    }


def assert_refused(done: subprocess.CompletedProcess[str], field: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("slurm-image: error: ")
    assert f"{field}:" in lines[0] or f"'{field}'" in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def bash_n(script: str) -> None:
    done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr


# -- a dry run: the plan and the script, and nothing created -------------------------------------


def test_dry_run_import_prints_plan_and_script_and_creates_nothing(
    run: Run, tmp_path: Path, profile: Path, workspace: Path
) -> None:
    before = snapshot(tmp_path)
    done = run(
        "--profile",
        str(profile),
        "import",
        PYTORCH,
        "--name",
        "torch",
        "--role",
        "client",
        "--dry-run",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    output = json.loads(done.stdout)
    assert set(output) == {"plan", "script"}
    plan, script = output["plan"], output["script"]
    assert plan["source_digest"] == DIGEST
    assert plan["request"] == {
        "operation": "import_oci",
        "name": "torch",
        "role": "client",
        "source": PYTORCH,
    }
    assert plan["enroot_uri"] == PYTORCH_URI
    assert plan["paths"]["job_dir"].startswith(f"{workspace}/images/.tmp/jobs/img-")
    for line in [
        "#SBATCH --partition=cpu",
        "#SBATCH --cpus-per-task=4",
        "#SBATCH --mem=16G",
        "#SBATCH --time=1:00:00",
    ]:
        assert f"\n{line}\n" in script
    assert f"readonly SOURCE_URI='docker://nvcr.io#nvidia/pytorch:24.05-py3@sha256:{HEX}'" in script
    assert 'enroot import -a "$architecture" -o "$PARTIAL" "$source_uri"' in script
    assert "--gres" not in script and "--gpus" not in script
    bash_n(script)
    assert snapshot(tmp_path) == before
    assert not workspace.exists()


def test_dry_run_inspect_of_an_existing_sqsh_has_no_import(
    run: Run, tmp_path: Path, profile: Path, workspace: Path
) -> None:
    image = tmp_path / "images" / "serving.sqsh"
    image.parent.mkdir()
    image.write_bytes(b"hsqs")
    before = snapshot(tmp_path)
    done = run(
        "--profile",
        str(profile),
        "inspect",
        str(image),
        "--name",
        "vllm",
        "--role",
        "serving",
        "--dry-run",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout)
    assert output["plan"]["operation"] == "inspect_sqsh"
    assert output["plan"]["source_digest"] is None
    assert output["plan"]["paths"]["sqsh"] == str(image)
    assert "enroot import" not in output["script"]
    assert "#SBATCH --partition=cpu" in output["script"]
    bash_n(output["script"])
    assert snapshot(tmp_path) == before
    assert not workspace.exists()


@pytest.mark.parametrize(
    "placement",
    [
        ["--json", "import", PYTORCH, "--name", "t", "--role", "client", "--dry-run"],
        ["import", PYTORCH, "--name", "t", "--role", "client", "--dry-run", "--json"],
        ["import", "--json", PYTORCH, "--dry-run", "--name", "t", "--role", "client"],
    ],
    ids=["before", "after", "between"],
)
def test_json_is_accepted_before_and_after_the_command(
    run: Run, profile: Path, placement: list[str]
) -> None:
    done = run("--profile", str(profile), *placement)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["source_digest"] == DIGEST


def test_human_dry_run_output_shows_plan_and_script(run: Run, profile: Path) -> None:
    done = run(
        "--profile", str(profile), "import", PYTORCH, "--name", "t", "--role", "client", "--dry-run"
    )
    assert done.returncode == 0, done.stderr
    assert "dry run: nothing created" in done.stdout
    assert "#!/bin/bash -p" in done.stdout
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stdout)


def test_profile_from_environment_then_working_directory(
    run: Run, tmp_path: Path, profile: Path
) -> None:
    args = ["import", PYTORCH, "--name", "t", "--role", "client", "--dry-run", "--json"]
    done = run(*args, env={"SLURM_IMAGE_PROFILE": str(profile)})
    assert done.returncode == 0, done.stderr
    (tmp_path / "slurm-image.toml").write_text(profile.read_text().replace('"cpu"', '"local"'))
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --partition=local" in json.loads(done.stdout)["script"]


def test_environment_override_reaches_the_script(run: Run, profile: Path) -> None:
    done = run(
        "--profile",
        str(profile),
        "import",
        PYTORCH,
        "--name",
        "t",
        "--role",
        "client",
        "--dry-run",
        "--json",
        env={
            "SLURM_IMAGE_IMAGE_BUILD__TIME_LIMIT": "10:00:00",
            "SLURM_IMAGE_IMAGE_BUILD__ACCOUNT": "12345",
        },
    )
    assert done.returncode == 0, done.stderr
    script = json.loads(done.stdout)["script"]
    assert "#SBATCH --time=10:00:00" in script and "#SBATCH --account=12345" in script


# -- refusals: exit 2, one line naming the field, nothing on disk --------------------------------

BAD_REFERENCES = {
    "credentials": f"user:pass@nvcr.io/nvidia/pytorch@{DIGEST}",
    "scheme": f"docker://nvcr.io/nvidia/pytorch@{DIGEST}",
    "query": f"nvcr.io/nvidia/pytorch?x=1@{DIGEST}",
    "fragment": f"nvcr.io#nvidia/pytorch@{DIGEST}",
    "no digest": "nvcr.io/nvidia/pytorch:24.05-py3",
    "uppercase digest": f"nvcr.io/nvidia/pytorch@sha256:{HEX.upper()}",
    "sha512": "nvcr.io/nvidia/pytorch@sha512:" + "a" * 128,
    "uppercase path": f"nvcr.io/NVIDIA/pytorch@{DIGEST}",
    "empty path part": f"nvcr.io//pytorch@{DIGEST}",
    "whitespace": f"nvcr.io/nvidia/py torch@{DIGEST}",
    "newline": f"nvcr.io/nvidia/pytorch@{DIGEST}\n#SBATCH --gres=gpu:1",
    "control": f"nvcr.io/nvidia/py\x1btorch@{DIGEST}",
    "dollar": f"nvcr.io/$(id)/pytorch@{DIGEST}",
    "backtick": f"nvcr.io/`id`/pytorch@{DIGEST}",
    "long name": "a/" * 128 + f"a@{DIGEST}",
    "long tag": "ubuntu:" + "t" * 129 + f"@{DIGEST}",
}


@pytest.mark.parametrize("reference", BAD_REFERENCES.values(), ids=BAD_REFERENCES.keys())
def test_malformed_reference_exits_2_naming_source_and_creates_nothing(
    run: Run, tmp_path: Path, profile: Path, workspace: Path, reference: str
) -> None:
    before = snapshot(tmp_path)
    done = run(
        "--profile",
        str(profile),
        "import",
        reference,
        "--name",
        "t",
        "--role",
        "client",
        "--dry-run",
        "--json",
    )
    assert_refused(done, "source")
    assert snapshot(tmp_path) == before
    assert not workspace.exists()


@pytest.mark.parametrize("key", ["credentials", "no digest", "newline", "dollar"])
def test_malformed_reference_is_refused_without_dry_run_too(
    run: Run, tmp_path: Path, profile: Path, workspace: Path, key: str
) -> None:
    before = snapshot(tmp_path)
    done = run(
        "--profile", str(profile), "import", BAD_REFERENCES[key], "--name", "t", "--role", "client"
    )
    assert_refused(done, "source")
    assert snapshot(tmp_path) == before
    assert not workspace.exists()


UNSAFE_WORKSPACES = {
    "space": "{tmp}/w s",
    "colon": "{tmp}/w:s",
    "comma": "{tmp}/w,s",
    "backslash": "{tmp}/w\\\\s",
    "tab": "{tmp}/w\\ts",
    "newline": "{tmp}/w\\ns",
    "relative": "ws",
    "dot-dot": "{tmp}/x/../ws",
    "double slash": "{tmp}//ws",
    "trailing slash": "{tmp}/ws/",
    "dot": "{tmp}/./ws",
    "hash": "{tmp}/w#s",
    "root": "/",
}


def refuse_workspace(run: Run, tmp_path: Path, root: str, *extra: str) -> None:
    path = tmp_path / "site.toml"
    path.write_text(PROFILE_TOML.format(root=root.format(tmp=tmp_path)))
    before = snapshot(tmp_path)
    done = run("--profile", str(path), "import", PYTORCH, "--name", "t", "--role", "client", *extra)
    assert_refused(done, "workspace_root")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("root", UNSAFE_WORKSPACES.values(), ids=UNSAFE_WORKSPACES.keys())
def test_unsafe_workspace_exits_2_and_creates_nothing(run: Run, tmp_path: Path, root: str) -> None:
    refuse_workspace(run, tmp_path, root, "--dry-run")


@pytest.mark.parametrize("key", ["space", "colon", "relative", "trailing slash"])
def test_unsafe_workspace_is_refused_without_dry_run_too(
    run: Run, tmp_path: Path, key: str
) -> None:
    refuse_workspace(run, tmp_path, UNSAFE_WORKSPACES[key])


def test_unsafe_workspace_from_the_environment_is_refused(
    run: Run, tmp_path: Path, profile: Path
) -> None:
    before = snapshot(tmp_path)
    done = run(
        "--profile",
        str(profile),
        "import",
        PYTORCH,
        "--name",
        "t",
        "--role",
        "client",
        env={"SLURM_IMAGE_WORKSPACE_ROOT": f"{tmp_path}/w s"},
    )
    assert_refused(done, "workspace_root")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("extra", [[], ["--no-submit"]], ids=["submit", "no-submit"])
def test_a_missing_workspace_root_exits_2_and_creates_nothing(
    run: Run, tmp_path: Path, profile: Path, workspace: Path, extra: list[str]
) -> None:
    before = snapshot(tmp_path)
    done = run(
        "--profile", str(profile), "import", PYTORCH, "--name", "t", "--role", "client", *extra
    )
    assert_refused(done, str(workspace))
    assert "does not exist" in done.stderr
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ('memory = "16G"', 'memory = "16GB"', "image_build.memory"),
        ("cpus_per_task = 4", "cpus_per_task = 0", "image_build.cpus_per_task"),
        ('time_limit = "1:00:00"', 'time_limit = "0:00:00"', "image_build.time_limit"),
        ('partition = "cpu"', 'partition = "cpu gpu"', "image_build.partition"),
        ('partition = "cpu"', 'partition = "cpu"\ngres = "gpu:1"', "image_build.gres"),
        ('partition = "cpu"', 'partition = "cpu"\nimporter = "tar"', "image_build.importer"),
        ('partition = "cpu"', 'partition = "cpu"\nimporter = "Stream"', "image_build.importer"),
        ('partition = "cpu"', 'partition = "cpu"\nimporter = true', "image_build.importer"),
        (
            'time_limit = "1:00:00"',
            'time_limit = "1:00:00"\n[enroot]\nenvironment = { ENROOT_DATA_PATH = "/x" }',
            "enroot.environment",
        ),
    ],
)
def test_bad_profile_field_exits_2_naming_the_dotted_key(
    run: Run, tmp_path: Path, profile: Path, old: str, new: str, field: str
) -> None:
    profile.write_text(profile.read_text().replace(old, new))
    before = snapshot(tmp_path)
    done = run(
        "--profile", str(profile), "import", PYTORCH, "--name", "t", "--role", "client", "--dry-run"
    )
    assert_refused(done, field)
    assert snapshot(tmp_path) == before


def test_missing_profile_exits_2(run: Run, tmp_path: Path) -> None:
    done = run(
        "--profile",
        str(tmp_path / "absent.toml"),
        "import",
        PYTORCH,
        "--name",
        "t",
        "--role",
        "client",
        "--dry-run",
    )
    assert_refused(done, "profile")
    assert list(tmp_path.iterdir()) == []


def test_no_profile_anywhere_exits_2(run: Run, tmp_path: Path) -> None:
    done = run("import", PYTORCH, "--name", "t", "--role", "client", "--dry-run")
    assert_refused(done, "profile")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["import", PYTORCH, "--name", "-bad", "--role", "client"], "name"),
        (["import", PYTORCH, "--name", "a/b", "--role", "client"], "name"),
        (["import", PYTORCH, "--name", "t", "--role", "admin"], "role"),
        (["inspect", "relative.sqsh", "--name", "t", "--role", "client"], "source"),
        (["inspect", "/x/y.img", "--name", "t", "--role", "client"], "source"),
        (["inspect", "/x/../y.sqsh", "--name", "t", "--role", "client"], "source"),
    ],
)
def test_bad_request_exits_2_naming_the_field(
    run: Run, tmp_path: Path, profile: Path, args: list[str], field: str
) -> None:
    before = snapshot(tmp_path)
    done = run("--profile", str(profile), *args, "--dry-run")
    assert_refused(done, field)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["import", PYTORCH, "--role", "client", "--dry-run"], "--name"),
        (["import", "--name", "t", "--role", "client", "--dry-run"], "SOURCE"),
        (["import", PYTORCH, "--name", "t", "--role", "client", "--bogus"], "--bogus"),
        (["import", PYTORCH, "--name", "t", "--role", "admin", "--dry-run"], "--role"),
        (["import", PYTORCH, "--na", "t", "--role", "client", "--dry-run"], "--na"),
        (["wait", "img-x", "--timeout", "soon"], "--timeout"),
        (["wait", "img-x", "--timeout", "-1"], "--timeout"),
        (["wait", "img-x", "--timeout", "nan"], "--timeout"),
        (["wait", "img-x", "--timeout", "inf"], "--timeout"),
        (["doctor", "--timeout", "0.5"], "--timeout"),
        (["status"], "ID"),
        (["nonsense"], "COMMAND"),
    ],
    ids=[
        "no name",
        "no source",
        "unknown option",
        "unknown role",
        "abbreviated option",
        "timeout not a number",
        "negative timeout",
        "nan timeout",
        "infinite timeout",
        "doctor timeout below 1",
        "no id",
        "unknown command",
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_argument(
    run: Run, profile: Path, args: list[str], named: str
) -> None:
    done = run("--profile", str(profile), *args)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("slurm-image: error: ") and named in done.stderr, done.stderr
    assert "--help)" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_help_and_version_exit_0(run: Run) -> None:
    for args in ([], ["--help"], ["import", "--help"], ["--version"]):
        done = run(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout.startswith("usage: slurm-image" if args != ["--version"] else "slurm-")


def test_catalog_cluster_option_selects_the_cluster(run: Run, tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.toml"
    body = PROFILE_TOML.replace("[image_build]", "[clusters.{name}.image_build]").replace(
        'workspace_root = "{root}"',
        '[clusters.{name}]\nhost_patterns = []\nworkspace_root = "{root}"',
    )
    catalog.write_text(
        body.format(name="alpha", root=tmp_path / "a")
        + body.format(name="beta", root=tmp_path / "b").replace('"cpu"', '"short"')
    )
    done = run(
        "--profile",
        str(catalog),
        "--cluster",
        "beta",
        "import",
        PYTORCH,
        "--name",
        "t",
        "--role",
        "client",
        "--dry-run",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)["plan"]
    assert plan["profile"]["image_build"]["partition"] == "short"
    assert plan["profile_selection"]["how"] == "explicit"
    assert plan["profile_selection"]["cluster"] == "beta"
    done = run(
        "--profile",
        str(catalog),
        "--cluster",
        "gamma",
        "import",
        PYTORCH,
        "--name",
        "t",
        "--role",
        "client",
        "--dry-run",
    )
    assert_refused(done, "cluster")
