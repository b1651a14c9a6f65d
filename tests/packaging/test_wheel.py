"""The built wheel: one import package, ``slurm_image``, that shares an environment with others.

Builds the wheel with ``pip wheel --no-deps`` and installs it into a fresh venv beside the PyPI
package ``entrypoints`` (a name the code once claimed at top level) and a site plugin that
registers a submitter under ``slurm_image.submitters``; and beside the example site submitter
of docs/site-submitter.md (examples/site-submitter/), installed as its own package, which must
pass the contract suite the wheel ships and be what the container builds for its kind. Needs
the package index; CI reaches it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from slurm_image.testing.submitter_contract import SubmitterContract
from support import unavailable

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "site-submitter"
PIP_TIMEOUT = 900


def _run(argv: list[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=PIP_TIMEOUT
    )


def _pip(python: Path, *args: str) -> None:
    done = _run([str(python), "-m", "pip", "--disable-pip-version-check", *args])
    if done.returncode != 0:
        text = done.stdout + done.stderr
        if any(
            sign in text for sign in ("No matching distribution", "NewConnectionError", "timed out")
        ):
            unavailable(f"the package index is not reachable: {text.strip().splitlines()[-1]}")
        raise AssertionError(f"pip {' '.join(args)} failed:\n{text}")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _pip(Path(sys.executable), "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT))
    (built,) = out.glob("slurm_image_lifecycle-*.whl")
    return built


PLUGIN_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "mysite-submitter"
version = "1.0"

[project.entry-points."slurm_image.submitters"]
mysite = "mysite_submitter:make"

[tool.hatch.build.targets.wheel]
packages = ["mysite_submitter"]
"""

PLUGIN_MODULE = """\
from slurm_image.adapters.memory import FakeSubmitter


class MySiteSubmitter(FakeSubmitter):
    name = "mysite"

    def __init__(self, settings):
        super().__init__()
        self.settings = dict(settings)


def make(settings):
    return MySiteSubmitter(settings)
"""

CHECK = """\
import json, sys
import entrypoints
import slurm_image
from slurm_image.domain.profile import parse_profile
from slurm_image.composition.container import build_container, require_submitter

profile = parse_profile({
    "workspace_root": "/srv/ws",
    "image_build": {"partition": "cpu", "cpus_per_task": 1, "memory": "1G",
                    "time_limit": "1:00:00"},
    "submitter": {"kind": "mysite", "mysite": {"endpoint": "https://sched.example.org"}},
})
container = build_container(profile)
require_submitter(container, profile)
submitter = container.submitter()
group = entrypoints.get_group_named("slurm_image.submitters")
print(json.dumps({
    "entrypoints_file": entrypoints.__file__,
    "entrypoints_version": entrypoints.__version__,
    "entrypoints_sees": {name: ep.module_name for name, ep in group.items()},
    "slurm_image_file": slurm_image.__file__,
    "submitter": type(submitter).__module__ + "." + type(submitter).__qualname__,
    "settings": submitter.settings,
}))
"""


def test_the_wheel_holds_one_top_level_name_slurm_image(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/", 1)[0] for name in names}
    dist_info = {name for name in top if name.endswith(".dist-info")}
    assert len(dist_info) == 1
    assert dist_info.pop().startswith("slurm_image_lifecycle-")
    assert top - {n for n in top if n.endswith(".dist-info")} == {"slurm_image"}
    for module in (
        "domain", "ports", "application", "adapters", "inspector", "streamer", "wire", "cli",
        "gateway", "composition",
    ):  # fmt: skip
        assert f"slurm_image/{module}/__init__.py" in names
    assert "slurm_image/inspector/inspect_image.py" in names
    assert "slurm_image/streamer/merge_layers.py" in names
    assert "slurm_image/inspector/enroot.rc" in names
    steps = sorted(path.name for path in (ROOT / "src" / "domain" / "job_steps").glob("*.sh"))
    assert steps
    for step in steps:  # the batch job's shell steps are package data the renderer reads
        assert f"slurm_image/domain/job_steps/{step}" in names
    assert "slurm_image/composition/main.py" in names
    pages = ROOT / "src" / "gateway" / "pages"
    shipped = sorted(
        path.relative_to(pages).as_posix()
        for folder in ("templates", "static")
        for path in (pages / folder).iterdir()
    )
    assert "templates/catalog.html" in shipped and "static/catalog.js" in shipped
    for page_file in shipped:  # the catalog's templates and assets are package data too
        assert f"slurm_image/gateway/pages/{page_file}" in names


def test_the_wheel_installs_beside_pypi_entrypoints_and_a_site_plugin(
    wheel: Path, tmp_path: Path
) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "mysite_submitter").mkdir(parents=True)
    (plugin / "pyproject.toml").write_text(PLUGIN_PYPROJECT)
    (plugin / "mysite_submitter" / "__init__.py").write_text(PLUGIN_MODULE)
    venv = tmp_path / "venv"
    done = _run([sys.executable, "-m", "venv", str(venv)])
    assert done.returncode == 0, done.stderr
    python = venv / "bin" / "python"
    _pip(python, "install", "-q", "entrypoints", str(wheel), str(plugin))

    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    purelib = Path(site.stdout.strip())
    for generic in ("domain", "ports", "application", "adapters", "inspector"):
        assert not (purelib / generic).exists(), f"{generic} installed at top level"

    checked = _run([str(python), "-c", CHECK], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    facts = json.loads(checked.stdout)
    assert Path(facts["entrypoints_file"]) == purelib / "entrypoints.py"
    assert facts["entrypoints_version"].count(".") >= 1
    assert facts["entrypoints_sees"] == {"mysite": "mysite_submitter"}
    assert Path(facts["slurm_image_file"]) == purelib / "slurm_image" / "__init__.py"
    assert facts["submitter"] == "mysite_submitter.MySiteSubmitter"
    assert facts["settings"] == {"endpoint": "https://sched.example.org"}

    helped = _run([str(venv / "bin" / "slurm-image"), "--help"], cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    for command in ("import", "inspect", "status", "cancel"):
        assert command in helped.stdout


def test_the_installed_cli_refuses_an_unknown_submitter_naming_the_plugins(
    wheel: Path, tmp_path: Path
) -> None:
    profile = tmp_path / "site.toml"
    profile.write_text(
        textwrap.dedent(
            """\
            workspace_root = "/srv/ws"
            [image_build]
            partition = "cpu"
            cpus_per_task = 1
            memory = "1G"
            time_limit = "1:00:00"
            [submitter]
            kind = "nosuch"
            """
        )
    )
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    _pip(venv / "bin" / "python", "install", "-q", str(wheel))
    done = _run(
        [str(venv / "bin" / "slurm-image"), "--profile", str(profile), "status", "x"], cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "submitter.kind" in done.stderr
    assert "Traceback" not in done.stderr


SELECT_SPOOL = """\
import json, sys
import slurm_image, spool_submitter
from slurm_image.domain.profile import parse_profile
from slurm_image.composition.container import build_container, require_submitter
from slurm_image.ports.submitter import SchedulerRejected

def profile(spool):
    return parse_profile({
        "workspace_root": "/srv/ws",
        "image_build": {"partition": "build", "cpus_per_task": 1, "memory": "1G",
                        "time_limit": "1:00:00"},
        "submitter": {"kind": "spool", "spool": {"spool": spool}},
    })

chosen = profile(sys.argv[1])
container = build_container(chosen)
require_submitter(container, chosen)
submitter = container.submitter()
missing = profile(sys.argv[1] + "-missing")
try:
    require_submitter(build_container(missing), missing)
    refused = None
except SchedulerRejected as error:
    refused = error.field
print(json.dumps({
    "module_file": spool_submitter.__file__,
    "slurm_image_file": slurm_image.__file__,
    "submitter": type(submitter).__module__ + "." + type(submitter).__qualname__,
    "ping": submitter.ping(),
    "refused_field": refused,
}))
"""


def test_the_example_site_submitter_passes_the_shipped_contract_as_its_own_package(
    wheel: Path, tmp_path: Path
) -> None:
    example = tmp_path / "site-submitter"
    shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    _pip(python, "install", "-q", str(wheel), f"{example}[test]")
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    purelib = Path(site.stdout.strip())

    # venv/bin/pytest, not python -m pytest: the source tree in the working directory must not
    # be importable, so that the entry point finds the installed package.
    tested = _run([str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", "-q"], cwd=example)
    report = tested.stdout + tested.stderr
    assert tested.returncode == 0, report
    contract = [name for name in dir(SubmitterContract) if name.startswith("test_")]
    assert f"{len(contract)} passed" in report, report
    assert "skipped" not in report and "xfail" not in report, report

    spool = tmp_path / "spool"
    (spool / "jobs").mkdir(parents=True)
    (spool / "partitions.json").write_text('{"build": 2}')
    (spool / "up").touch()
    checked = _run([str(python), "-c", SELECT_SPOOL, str(spool)], cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    facts = json.loads(checked.stdout)
    assert Path(facts["module_file"]) == purelib / "spool_submitter" / "__init__.py"
    assert Path(facts["slurm_image_file"]) == purelib / "slurm_image" / "__init__.py"
    assert facts["submitter"] == "spool_submitter.SpoolSubmitter"
    assert facts["ping"] == f"queue daemon at {spool} UP"
    assert facts["refused_field"] == "spool"


BENCH_KEYS = {
    "job_vs_bare_enroot",
    "sqsh_reads_in_job",
    "show_vs_python",
    "show_missing_vs_python",
    "gateway_show_p99_ms",
    "gateway_show_vs_cli",
    "gateway_list_per_second",
}


@pytest.mark.full_only
def test_the_bench_runs_from_an_install_without_the_test_extra(wheel: Path, tmp_path: Path) -> None:
    """bench/run.py needs the product as installed and the repository's Enroot stand-in, not
    the test harness: here pytest is not even importable."""
    for tool in ("mksquashfs", "unsquashfs", "strace", "openssl"):
        if shutil.which(tool) is None:
            unavailable(f"{tool} missing (apt-get install squashfs-tools strace openssl)")
    if not Path("/bin/busybox").is_file():
        unavailable("/bin/busybox missing (apt-get install busybox-static)")
    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", str(venv)]).returncode == 0
    python = venv / "bin" / "python"
    _pip(python, "install", "-q", str(wheel))
    no_pytest = _run([str(python), "-c", "import pytest"], cwd=tmp_path)
    assert no_pytest.returncode != 0 and "No module named 'pytest'" in no_pytest.stderr

    done = _run([str(python), str(ROOT / "bench" / "run.py"), "--smoke", "--json"], cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert set(figures) >= BENCH_KEYS, figures
    assert figures["sqsh_reads_in_job"] > 0
    assert figures["scheduler_calls_per_poll_100_jobs"] == 1
    assert figures["gateway_coalesced_jobs_for_10_imports"] == 1
