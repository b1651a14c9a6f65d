"""The bench's own parts stay true to the product: its workspace builders publish real
aliases, the hashing code it cuts from the rendered job is the job's and hashes right, and the
Slurm bench's profiles, scripts and figures are what it says."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from support import PACKAGE_DIR

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(file: str) -> ModuleType:
    """bench/FILE, loaded under a name of its own; sys.path as it was afterwards."""
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location(f"slurm_image_bench_{file[:-3]}", BENCH / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("run.py")


def part(function: object) -> ModuleType:
    """The module of bench/ that holds ``function``, as bench/run.py imported it."""
    return sys.modules[function.__module__]


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


def test_the_long_history_is_read_back_whole_and_in_order_by_the_stores_history(
    bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    site.publish(site.publish_finished("first", b"hsqs" + bytes(60) + b"bench"))
    site.long_history(200)
    read = site.sbatch.history()
    assert (len(read.events), read.skipped) == (201, 0)
    assert [event.time for event in read.events] == sorted(event.time for event in read.events)
    assert read.events[-1].alias == "first"  # the publication's own event stays the last
    kinds = {event.event for event in read.events}
    assert kinds == {"published", "replaced", "job_failed", "cancelled"}
    metrics = site.sbatch.metrics()
    failed = [item.count for item in metrics.lifecycles if item.outcome == "failed"]
    assert sum(failed) == 20


def test_the_jobs_hash_function_is_cut_whole_from_the_rendered_script(
    bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    source = "registry.example.org/team/app:1@sha256:" + "7" * 64
    planned = site.sbatch.plan("import_oci", source, name="app", role="client")
    function = part(bench.hashing).hash_function(planned.script)
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
            [sys.executable, "-c", getattr(part(bench.commands), name) + check],
            capture_output=True,
            text=True,
            check=True,
        )
        loaded[name] = done.stdout.strip()
    assert loaded["FLOOR_MODEL"] == "['importlib.metadata', 'pydantic.fields']"
    assert loaded["FLOOR_CONTAINER"] == (
        "['asyncio', 'dependency_injector.containers', 'importlib.metadata', 'pydantic.fields']"
    )


def test_the_big_image_is_generated_once_per_parameters_into_the_cache(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    big_image = part(bench.big_figures)
    workloads = sys.modules[big_image.big_images.__module__]
    monkeypatch.setattr(workloads, "CACHE", tmp_path / "cache")
    root = tmp_path / "root"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3").write_text("#!/bin/sh\n")
    (root / "usr" / "share" / "doc").mkdir(parents=True)
    (root / "usr" / "share" / "doc" / "left-out").write_text("excluded as in the test images")
    (root / ".slurm-image-root-complete").touch()
    spec = big_image.BigImageSpec(
        random_mib=2, random_files=2, small_files=30, small_bytes=512, files_per_directory=10,
        root=str(root),
    )  # fmt: skip
    directory = workloads.generate_big_layers(spec, log=lambda _: None)

    assert directory == tmp_path / "cache" / f"big-{spec.key()}"
    record = json.loads((directory / "layers.json").read_text())
    names = [layer["name"] for layer in record["layers"]]
    assert names == ["bottom", "top1", "top2"]
    for layer in record["layers"]:
        blob = (directory / f"{layer['name']}.tar.gz").read_bytes()
        assert layer["digest"] == hashlib.sha256(blob).hexdigest()
        assert layer["size"] == len(blob)
        tar = gzip.decompress(blob)
        assert layer["diff_id"] == hashlib.sha256(tar).hexdigest()
        assert layer["tar_bytes"] == len(tar)
    bottom = subprocess.run(
        ["tar", "-tzf", str(directory / "bottom.tar.gz")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "./usr/bin/python3" in bottom
    assert "./usr/share/doc/left-out" not in bottom
    assert (
        sum(1 for name in bottom if name.startswith("./opt/bench/src/d") and name.endswith(".py"))
        == 30
    )
    assert sum(1 for name in bottom if name.startswith("./opt/bench/weights/part")) == 2
    assert record["layers"][0]["tar_bytes"] > 2 << 20  # the random part does not compress
    assert record["layers"][0]["size"] > 2 << 20

    def regenerate(*_: object) -> None:
        raise AssertionError("generated again")

    monkeypatch.setattr(workloads, "_generate_content", regenerate)
    assert workloads.generate_big_layers(spec, log=lambda _: None) == directory
    other = big_image.BigImageSpec(**{**spec.__dict__, "small_files": 31})
    assert other.key() != spec.key()
    with pytest.raises(AssertionError, match="generated again"):
        workloads.generate_big_layers(other, log=lambda _: None)
    assert sorted(path.name for path in (tmp_path / "cache").iterdir()) == [directory.name]


def test_phase_seconds_are_the_spans_between_the_phases_first_sightings(
    bench: ModuleType,
) -> None:
    big_image = part(bench.big_figures)
    ran = big_image.Ran(10.0, 0, 0, "", "", {"import": 1.5, "checks": 0.2, "hash": 8.0})
    assert big_image.phase_seconds(ran) == pytest.approx(
        {"checks": 1.3, "import": 6.5, "hash": 2.0}
    )
    assert big_image.phase_seconds(big_image.Ran(3.0, 0, 0, "", "", {})) == {}


def test_the_phase_clock_notes_each_phase_once_when_it_first_appears(
    bench: ModuleType, tmp_path: Path
) -> None:

    import batch  # bench/batch.py, on sys.path while bench/run.py loads

    record = tmp_path / "progress.json"
    start = time.perf_counter()
    with batch.phase_clock(record, start) as seen:
        for phase in ("checks", "import", "checks", "done"):
            record.write_text(json.dumps({"format": 1, "phase": phase}))
            time.sleep(0.35)
        record.write_text("not json")
        time.sleep(0.25)
    assert list(seen) == ["checks", "import", "done"]
    assert 0 <= seen["checks"] < seen["import"] < seen["done"]


def test_a_bare_import_is_phased_by_the_lines_enroot_prints(
    bench: ModuleType, tmp_path: Path
) -> None:
    import batch  # bench/batch.py, on sys.path while bench/run.py loads

    script = (
        "echo '[INFO] Querying registry' >&2; sleep 0.3;"
        " echo '[INFO] Extracting image layers...' >&2; sleep 0.3;"
        " echo '[INFO] Extracting image layers...' >&2;"
        " echo '[INFO] Creating squashfs filesystem...' >&2; sleep 0.3; echo out"
    )
    ran = batch.run_measured(
        ["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin"},
        markers=batch.ENROOT_IMPORT_MARKERS,
        first_phase="download",
    )
    assert ran.returncode == 0 and ran.stdout == "out\n"
    assert ran.stderr.count("Extracting image layers...") == 2  # the whole output is kept
    assert list(ran.phases) == ["download", "extract", "squash"]
    spent = part(bench.big_figures).phase_seconds(ran)
    assert spent["download"] >= 0.25 and spent["squash"] >= 0.25
    assert sum(spent.values()) == pytest.approx(ran.seconds)


@pytest.fixture(scope="module")
def on_slurm() -> ModuleType:
    return load_bench("on_slurm.py")


def slurm_profile(on_slurm: ModuleType, importer: str) -> str:
    return str(
        on_slurm.PROFILE.format(
            root="/srv/ws",
            partition="build",
            memory=on_slurm.MEMORY,
            scratch="/tmp",
            job_path="/opt/enroot:/usr/bin",
            importer=importer,
        )
    )


def test_the_slurm_bench_profiles_name_their_importer(on_slurm: ModuleType) -> None:
    import tomllib

    from slurm_image.domain.profile import parse_profile

    enroot = parse_profile(tomllib.loads(slurm_profile(on_slurm, "")))
    stream = parse_profile(tomllib.loads(slurm_profile(on_slurm, 'importer = "stream"\n')))
    assert (enroot.submitter.kind, enroot.image_build.partition) == ("sbatch", "build")
    assert enroot.image_build.importer_name == "enroot"
    assert stream.image_build.importer_name == "stream"
    assert enroot.model_copy(update={"image_build": stream.image_build}) == stream


def test_the_bare_import_squashes_with_the_options_the_products_job_gives_enroot(
    on_slurm: ModuleType, tmp_path: Path
) -> None:
    import re

    from slurm_image import Lifecycles

    profile = tmp_path / "profile.toml"
    profile.write_text(slurm_profile(on_slurm, "").replace("/srv/ws", str(tmp_path / "ws")))
    (tmp_path / "ws").mkdir(mode=0o700)
    source = "registry.example.org/team/app:1@sha256:" + "7" * 64
    script = (
        Lifecycles.from_profile(str(profile), environ={})
        .plan("import_oci", source, name="app", role="client")
        .script
    )
    memory = re.search(r"^readonly SQUASH_MEMORY='?([^'\n]*)'?$", script, re.MULTILINE)
    assert memory is not None
    assert f"-comp lzo -noD -exit-on-error {memory.group(1)}" == on_slurm.SQUASH_OPTIONS
    assert 'squash="-comp lzo -noD"' in script and 'squash="$squash -exit-on-error"' in script


def test_the_bare_job_runs_enroot_import_and_stamps_each_phase(
    on_slurm: ModuleType, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    enroot = bin_dir / "enroot"
    enroot.write_text(
        "#!/bin/bash\n"
        'printf \'%s\\n\' "$*" "$ENROOT_SQUASH_OPTIONS" "$ENROOT_CACHE_PATH" >"$HOME/called"\n'
        "echo '[INFO] Querying registry' >&2; sleep 0.3\n"
        "echo '[INFO] Extracting image layers...' >&2; sleep 0.3\n"
        "echo '[INFO] Creating squashfs filesystem...' >&2; sleep 0.3\n"
    )
    enroot.chmod(0o755)
    script = tmp_path / "bare.sh"
    script.write_text(
        on_slurm.BARE.format(
            scratch=tmp_path / "s",
            cache=tmp_path / "cache",
            path=f"{bin_dir}:/usr/bin:/bin",
            home=tmp_path,
            squash=on_slurm.SQUASH_OPTIONS,
            start=on_slurm.BARE_START,
            arch="x86_64",
            uri="docker://x",
        )
    )
    before = time.time()
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=True)
    after = time.time()

    called = (tmp_path / "called").read_text().splitlines()
    assert called == [
        f"import -a x86_64 -o {tmp_path}/s/bare.sqsh docker://x",
        on_slurm.SQUASH_OPTIONS,
        str(tmp_path / "cache"),
    ]
    assert (tmp_path / "cache").is_dir() and not (tmp_path / "s").exists()
    seen = on_slurm.bare_phases(done.stdout)
    assert list(seen) == ["download", "extract", "squash"]
    assert before <= seen["download"] < seen["extract"] < seen["squash"] <= after
    spent = on_slurm.spans(seen, after)
    assert spent["download"] >= 0.25 and spent["extract"] >= 0.25 and spent["squash"] >= 0.25


def test_the_progress_phases_are_those_of_the_attempt_made_while_watching(
    on_slurm: ModuleType, tmp_path: Path
) -> None:
    jobs = tmp_path / "ws" / "images" / ".tmp" / "jobs"
    (jobs / "earlier").mkdir(parents=True)
    (jobs / "earlier" / "progress.json").write_text(json.dumps({"format": 1, "phase": "done"}))
    with on_slurm.progress_phases(tmp_path / "ws") as seen:
        (jobs / "new").mkdir()
        for phase in ("checks", "download", "checks", "squash"):
            (jobs / "new" / "progress.json").write_text(json.dumps({"format": 1, "phase": phase}))
            time.sleep(0.35)
    assert list(seen) == ["checks", "download", "squash"]
    assert seen["checks"] < seen["download"] < seen["squash"]


def test_the_slurm_figures_are_ratios_of_the_contestants_medians(on_slurm: ModuleType) -> None:
    from types import SimpleNamespace

    images = SimpleNamespace(tar_bytes=2_110_000_000, entries=46733, compressed_bytes=1.77e9)
    seconds = {
        "bare": [100, 120, 110],
        "bare_warm": [80, 90, 100],
        "enroot": [105, 125, 115],
        "enroot_warm": [85, 95, 105],
        "stream": [60, 70, 80],
        "stream_warm": [40, 50, 30],
    }
    ran = []
    for i in range(3):
        one = {}
        for name, values in seconds.items():
            one[name] = {"seconds": values[i], "phases": {"squash": values[i] / 2}}
            if name.startswith(("enroot", "stream")):
                one[name] |= {"path": "overlay", "published_after_s": 1.0 + i}
        ran.append(one)

    figures = on_slurm.figures_of(images, 3, ran)

    assert figures["stream_vs_bare_enroot"] == pytest.approx(70 / 110)
    assert figures["enroot_job_vs_bare_enroot"] == pytest.approx(115 / 110)
    assert figures["stream_warm_vs_enroot_warm"] == pytest.approx(40 / 90)
    assert figures["slurm_stream_warm_s"] == 40 and figures["slurm_bare_warm_squash_s"] == 45
    assert figures["slurm_published_after_job_end_max_s"] == 3.0
    assert figures["slurm_overlay_path"] == 1 and figures["slurm_image_entries"] == 46733
    ran[0]["stream"]["path"] = "unpacked"
    assert on_slurm.figures_of(images, 3, ran)["slurm_overlay_path"] == 0


@pytest.fixture(scope="module")
def gateway_bench(bench: ModuleType) -> ModuleType:
    return sys.modules[bench.under_load.__module__]


def test_the_loads_client_reads_answers_back_to_back_and_refuses_one_without_a_length(
    gateway_bench: ModuleType, tmp_path: Path
) -> None:
    raw_http = sys.modules[gateway_bench.Connection.__module__]
    sock = tmp_path / "s.sock"
    answers = [
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nx: y\r\n\r\nhello",
        b"HTTP/1.1 404 Not Found\r\ncontent-type: a\r\ncontent-length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    ]
    asked: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for reply in answers:
            asked.append(await reader.readuntil(b"\r\n\r\n"))
            writer.write(reply)
        await writer.drain()

    async def scenario() -> list[object]:
        server = await asyncio.start_unix_server(answer, str(sock))
        connection = await gateway_bench.Connection.open(sock)
        got: list[object] = [await connection.get("/a"), await connection.get("/b?x=1")]
        with pytest.raises(raw_http.NotUnderstood, match="content-length"):
            await connection.get("/c")
        await connection.close()
        server.close()
        return got

    assert asyncio.run(scenario()) == [(200, b"hello"), (404, b"{}")]
    assert asked[1] == b"GET /b?x=1 HTTP/1.1\r\nhost: gateway\r\n\r\n"


def test_the_percentile_is_the_nearest_rank(gateway_bench: ModuleType) -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert gateway_bench.percentile(values, 0.50) == 50.0
    assert gateway_bench.percentile(values, 0.99) == 99.0
    assert gateway_bench.percentile(values, 1.0) == 100.0
    assert gateway_bench.percentile([7.0], 0.99) == 7.0


def test_the_gateway_load_asks_a_served_store_for_every_alias_and_the_whole_catalog(
    bench: ModuleType, gateway_bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    names = ["alias0000", "alias0001", "alias0002"]
    site.publish(site.publish_finished(names[0], b"hsqs" + bytes(60) + b"bench"))
    for name in names[1:]:
        site.alias(name)
    shown = gateway_bench.Catalog(site, names)
    sizes = gateway_bench.LoadSizes(
        workers=2,
        clients=4,
        show_requests=12,
        list_aliases=0,
        list_requests=4,
        rounds=1,
        listing_aliases=0,
    )
    env = dict(bench.ENV, PYTHONPATH=PACKAGE_DIR)
    figures = gateway_bench.under_load(
        shown, shown, sizes, cli=bench.CLI, env=env, rounds=bench.rounds
    )
    assert (figures["gateway_clients"], figures["gateway_workers"]) == (4, 2)
    assert figures["gateway_list_aliases"] == 3
    for kind in ("show", "show_cold", "show_paced", "list"):
        assert figures[f"gateway_{kind}_per_second"] > 0
        assert 0 < figures[f"gateway_{kind}_p50_ms"] <= figures[f"gateway_{kind}_p99_ms"]
        assert figures[f"gateway_{kind}_server_cpu_ms"] >= 0
    assert figures["gateway_show_vs_cli"] == pytest.approx(
        figures["gateway_show_p50_ms"] / figures["gateway_cli_show_ms"]
    )
    assert not (tmp_path / "site" / "gateway.sock").exists(), "the server stopped and cleaned up"


def test_the_full_listing_reads_every_page_of_a_large_catalog_and_the_cli_its_whole(
    bench: ModuleType, gateway_bench: ModuleType, tmp_path: Path
) -> None:
    site = bench.Site(tmp_path / "site")
    names = [f"alias{i:05d}" for i in range(1001)]
    site.publish(site.publish_finished(names[0], b"hsqs" + bytes(60) + b"bench"))
    site.copies(names[0], names[1:])
    figures = gateway_bench.full_listing(
        gateway_bench.Catalog(site, names),
        cli=bench.CLI,
        env=dict(bench.ENV, PYTHONPATH=PACKAGE_DIR),
        rounds=bench.rounds,
        count=1,
    )
    assert (figures["listing_aliases"], figures["listing_gateway_pages"]) == (1001, 2)
    assert figures["listing_gateway_bytes"] > 1001 * 100
    assert figures["listing_cli_bytes"] > 1001 * 100
    assert figures["listing_gateway_s"] > 0 and figures["listing_cli_s"] > 0


def test_ten_requesters_of_one_digest_through_the_gateway_make_one_job(
    gateway_bench: ModuleType, tmp_path: Path
) -> None:
    from slurm_image.domain.store_layout import StoreLayout

    coalesced = gateway_bench.coalescing(tmp_path / "coalescing")

    assert coalesced.jobs == 1
    layout = StoreLayout(str(tmp_path / "coalescing" / "ws"))
    owners = {}
    for i in range(10):
        alias = json.loads(Path(layout.alias(f"coalesced-requester{i}")).read_bytes())
        owners[alias["owner"]["user"]] = alias["entries"][0]["sqsh_sha256"]
    assert sorted(owners) == [f"requester{i}" for i in range(10)]
    assert len(set(owners.values())) == 1, "one artifact for all ten"
