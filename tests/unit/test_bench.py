"""bench/run.py's own parts stay true to the product: its workspace builders publish real
aliases, and the hashing code it cuts from the rendered job is the job's and hashes right."""

from __future__ import annotations

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/run.py, loaded under a name of its own; sys.path as it was afterwards."""
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location("slurm_image_bench_run", BENCH / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def test_the_site_builder_publishes_aliases_the_catalog_resolves(
    bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    sqsh = b"hsqs" + bytes(60) + b"bench"
    site.publish(site.publish_finished("first", sqsh))
    site.alias("second")
    names = [record.name for record in site.sbatch.list_aliases()]
    assert names == ["first", "second"]
    assert site.sbatch.resolve("second").sqsh_sha256 == hashlib.sha256(sqsh).hexdigest()
    (staged,) = site.staged(1)
    assert Path(site.root, "images", ".tmp", "jobs", staged, "plan.json").is_file()


def test_the_jobs_hash_function_is_cut_whole_from_the_rendered_script(
    bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    source = "registry.example.org/team/app:1@sha256:" + "7" * 64
    planned = site.sbatch.plan("import_oci", source, name="app", role="client")
    function = bench.hash_function(planned.script)
    assert function.startswith("hash_file() {\n") and function.endswith("}\n")
    data = tmp_path / "data"
    data.write_bytes(b"some bytes\n" * 1000)
    out = subprocess.run(
        ["bash", "-c", f'{function}hash_file <"$1"', "bash", str(data)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == hashlib.sha256(data.read_bytes()).hexdigest()


def test_the_floors_load_what_every_validating_container_command_loads(bench: ModuleType) -> None:
    """The model floor builds and validates a model (pydantic's field types and its plugin
    discovery come with the first one); the container floor adds dependency-injector."""
    check = (
        "import sys\n"
        "print(sorted(m for m in ('pydantic.fields', 'importlib.metadata', 'asyncio',"
        " 'dependency_injector.containers') if m in sys.modules))\n"
    )
    loaded = {}
    for name in ("FLOOR_MODEL", "FLOOR_CONTAINER"):
        done = subprocess.run(
            [sys.executable, "-c", getattr(bench, name) + check],
            capture_output=True,
            text=True,
            check=True,
        )
        loaded[name] = done.stdout.strip()
    assert loaded["FLOOR_MODEL"] == "['importlib.metadata', 'pydantic.fields']"
    assert loaded["FLOOR_CONTAINER"] == (
        "['asyncio', 'dependency_injector.containers', 'importlib.metadata', 'pydantic.fields']"
    )
