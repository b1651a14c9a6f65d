"""One benchmark of the whole product: every figure a ratio against a baseline of the same run.

Usage: .venv/bin/python bench/run.py [--quick | --smoke] [--big | --big-only | --gateway-only]
                                     [--json]

Run it with the interpreter of the environment the product is installed in (``pip install
.``; the test extra is not needed): it imports ``slurm_image`` as installed, times the
``slurm-image`` console script next to that interpreter, and runs the batch job the product
stages as slurmd does, with the Enroot stand-in of this repository (bench/batch.py). Nothing
but ``--big`` needs the local registry, and nothing the local Slurm cluster. Rounds run every
contestant once in turn, so a noisy neighbour slows a figure and its baseline alike; each
figure is a ratio of medians.

``--smoke`` is one round of everything on small inputs (a check that the bench runs, not a
measurement); ``--big`` adds the big-image workload (bench/big_image.py: a generated image of
about 2.2 GB in the local registry, minutes per round), ``--big-only`` runs it alone;
``--gateway-only`` runs the gateway's figures alone, on a store built for them.

Keys (``--json`` prints them as one object; the goals are in ``GOALS``):
  hash_vs_openssl        Sha256Hasher's throughput / ``openssl dgst -sha256``'s, large file
  job_hash_vs_openssl    the rendered job's ``hash_file`` (bash) / openssl, same file
  cli_help_vs_python     ``slurm-image --help`` / ``python -c pass``
  show_vs_python         ``slurm-image show NAME --json`` (1,000 aliases published) / python
  show_missing_vs_python ``slurm-image show NAME`` of an alias not published (exit 2) / python
  dry_run_vs_python      ``slurm-image import REF ... --dry-run --json`` / python
  submit_vs_python       ``slurm-image submit ID`` (recording sbatch stub) / python
  metrics_vs_python      ``slurm-image metrics --textfile PATH`` (1,000 aliases, a history of
                         50,000 events) / python
  scheduler_calls_per_poll_100_jobs   scheduler calls in one poll of ``wait`` for 100 jobs
  sqsh_reads_in_job      bytes the job reads from the .sqsh (and its private copy) / its size
  job_vs_bare_enroot     the rendered inspect job / ``enroot create`` + ``start python3 -c
                         pass`` + ``remove`` on the same image, both with the stand-in
  publish_per_second     publications per second into a local workspace
  gateway_show_per_second, gateway_show_p50_ms, gateway_show_p99_ms
                         ``slurm-image serve --workers 2`` (``gateway_workers``; processes of
                         its own, on a unix socket, over the store of ``show_vs_python``) asked
                         ``GET /v1/aliases/NAME`` by 50 concurrent clients: requests per
                         second, latency percentiles (bench/gateway.py)
  gateway_show_paced_*   the same figures with 500 requests a second offered (each latency
                         counted from when its request was due); ``gateway_show_paced_vs_cli``
                         its p50 over the command line's ``show``
  gateway_show_vs_cli    the gateway's p50 ``show`` under that load / ``slurm-image show NAME
                         --json``'s wall time (``gateway_cli_show_ms``), in the same run
  gateway_list_per_second, gateway_list_p50_ms, gateway_list_p99_ms
                         the same for ``GET /v1/aliases`` (the whole catalog) over a store of
                         ``gateway_list_aliases`` aliases
  gateway_{show,list}_server_cpu, gateway_{show,list}_client_cpu
                         CPU seconds per second of the load spent by the server and by the
                         load generator (1.0: one core): which side saturated
  gateway_{show,list}_server_cpu_ms   the server's CPU time per request
  gateway_idle_show_ms   one ``show`` of the same gateway asked by one client alone
  listing_gateway_bytes, listing_gateway_s, listing_gateway_pages
                         the whole catalog of a store of ``listing_aliases`` aliases (10,000)
                         read page by page (1,000 a page) from an idle gateway: bytes, seconds
  listing_cli_bytes, listing_cli_s   the same store's ``slurm-image list --json``
  gateway_coalesced_jobs_for_10_imports   jobs submitted for 10 concurrent imports of one
                         digest by 10 requesters through the gateway (must be 1); with
                         ``gateway_coalesce_joined_s`` (until all ten were answered) and
                         ``gateway_coalesce_published_s`` (the job's end until all ten aliases)

Also printed: ``python_ms`` (the baseline), ``seconds`` (the run's wall time), and two floors
below which no command that validates with the domain's models through the container can go:
``floor_model_vs_python`` (``python -c`` declaring one frozen, strict pydantic model and
validating one value: pydantic, its field types and its plugin discovery, as the first
validation of any command loads them) and ``floor_container_vs_python`` (the same, after
``import dependency_injector.containers``, which imports asyncio, as the product imports it:
``composition.lean_imports``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parent
sys.path.insert(0, str(HERE))  # bench/workloads.py, bench/batch.py, bench/gateway.py

from batch import (  # noqa: E402
    ENROOT_IMPORT_MARKERS,
    ORDINARY_UID,
    JobSite,
    Ran,
    Staged,
    bare_scratch,
    remove,
    run_measured,
)
from workloads import BigImageSpec, Site, bench_image, big_images  # noqa: E402

from gateway import (  # noqa: E402
    Catalog,
    LoadSizes,
    coalescing_figures,
    full_listing,
    under_load,
)
from slurm_image.adapters.local_store import LocalStore  # noqa: E402
from slurm_image.adapters.memory import FakeSubmitter  # noqa: E402
from slurm_image.adapters.sha256_hasher import Sha256Hasher  # noqa: E402
from slurm_image.adapters.system_clock import SystemClock  # noqa: E402
from slurm_image.application.observe import Observe  # noqa: E402
from slurm_image.application.wait import Wait  # noqa: E402
from slurm_image.domain.reference import parse_reference  # noqa: E402

GOALS: dict[str, tuple[str, float]] = {
    "hash_vs_openssl": (">=", 0.9),
    "job_hash_vs_openssl": (">=", 0.9),
    "cli_help_vs_python": ("<=", 10),
    "show_vs_python": ("<=", 8),
    "show_missing_vs_python": ("<=", 8),
    "dry_run_vs_python": ("<=", 15),
    "submit_vs_python": ("<=", 15),
    "scheduler_calls_per_poll_100_jobs": ("<=", 1),
    "sqsh_reads_in_job": ("<=", 2),
    "job_vs_bare_enroot": ("<=", 1.2),
    "big_job_vs_bare_import": ("<=", 1.10),
    "big_second_vs_first_job": ("<=", 0.6),
    "gateway_show_p99_ms": ("<=", 50),
    "gateway_show_per_second": (">=", 500),
    "gateway_show_vs_cli": ("<=", 0.1),
    "gateway_show_paced_p99_ms": ("<=", 50),
    "gateway_coalesced_jobs_for_10_imports": ("==", 1),
}

BIN = Path(sys.executable).parent
PYTHON = str(Path(sys.executable))
CLI = str(BIN / "slurm-image")


def child_environment() -> dict[str, str]:
    """The caller's environment as a user has it: bytecode cached, as after ``pip install``
    (a ``PYTHONDONTWRITEBYTECODE`` left over from a test harness would recompile every module
    at every start), and no ``SLURM_IMAGE_*`` setting of the caller's."""
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONDONTWRITEBYTECODE" and not key.startswith("SLURM_IMAGE_")
    }


ENV = child_environment()


def _run(argv: Sequence[str], **options: Any) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(argv, env=options.pop("env", ENV), capture_output=True, **options)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()}")
    return done


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def rounds(contestants: dict[str, Callable[[], object]], count: int) -> dict[str, float]:
    """Medians of ``count`` rounds, each timing every contestant once, in turn."""
    samples: dict[str, list[float]] = {name: [] for name in contestants}
    for _ in range(count):
        for name, action in contestants.items():
            samples[name].append(_timed(action))
    return {name: statistics.median(values) for name, values in samples.items()}


# -- hashing ---------------------------------------------------------------------------------


def hash_function(script: str) -> str:
    """The ``hash_file`` function of a rendered job, as its text."""
    match = re.search(r"^hash_file\(\) \{\n.*?^\}\n", script, re.MULTILINE | re.DOTALL)
    if match is None:
        raise SystemExit("the rendered script has no hash_file function")
    return match.group(0)


def hashing(path: Path, script: str, repetitions: int) -> dict[str, float]:
    expected = _run(["openssl", "dgst", "-sha256", "-r", str(path)]).stdout.split()[0].decode()
    job_code = f'set -euo pipefail\n{hash_function(script)}hash_file <"$1"\n'

    def openssl() -> None:
        _run(["openssl", "dgst", "-sha256", "-r", str(path)])

    def ours() -> None:
        if Sha256Hasher().digest_file(str(path)).sha256 != expected:
            raise SystemExit("Sha256Hasher disagrees with openssl")

    def job() -> None:
        out = _run(["bash", "-c", job_code, "bash", str(path)]).stdout.decode().strip()
        if out != expected:
            raise SystemExit(f"the job's hash_file gave {out!r}, not {expected}")

    times = rounds({"openssl": openssl, "ours": ours, "job": job}, repetitions)
    return {
        "hash_vs_openssl": times["openssl"] / times["ours"],
        "job_hash_vs_openssl": times["openssl"] / times["job"],
    }


# -- start-up of the commands ----------------------------------------------------------------


FLOOR_MODEL = """\
from pydantic import BaseModel, ConfigDict
class Floor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
    name: str
Floor.model_validate({"name": "floor"})
"""
FLOOR_CONTAINER = (
    "from slurm_image.composition.lean_imports import without_web_framework\n"
    "with without_web_framework():\n"
    "    import dependency_injector.containers\n" + FLOOR_MODEL
)
"""The container as the product imports it (composition/lean_imports.py: with the gateway's web
framework hidden from dependency-injector's wiring)."""


def commands(
    site: Site, repetitions: int, alias: str, aliases: int
) -> tuple[dict[str, float], str]:
    """The CLI's commands against ``python -c pass`` (``show`` of the published ``alias``, one
    of ``aliases`` that ``metrics`` counts); also returns a rendered script."""
    profile = ["--profile", str(site.sbatch_profile)]
    source = f"registry.example.org/team/other:1@sha256:{'7' * 64}"
    dry_run = [CLI, *profile, "import", source, "--name", "dry", "--role", "client"]
    dry_run += ["--dry-run", "--json"]
    staged = iter(site.staged(repetitions + 1))
    calls_before = _calls(site)

    def submit() -> None:
        out = json.loads(_run([CLI, *profile, "--json", "submit", next(staged)]).stdout)
        if not out.get("job_id"):
            raise SystemExit(f"submit answered {out}")

    def show() -> None:
        out = json.loads(_run([CLI, *profile, "show", alias, "--json"]).stdout)
        if out["name"] != alias:
            raise SystemExit(f"show answered {out}")

    textfile = site.base / "slurm_image.prom"
    aliases_line = (
        f'slurm_image_aliases{{architecture="x86_64",role="client",store="{site.root}"}}'
        f" {aliases}.0\n"
    )

    def metrics() -> None:
        _run([CLI, *profile, "metrics", "--textfile", str(textfile)])
        if aliases_line not in textfile.read_text():
            raise SystemExit(f"metrics wrote no {aliases_line!r}")

    def show_missing() -> None:
        done = subprocess.run(
            [CLI, *profile, "show", "missing"], env=ENV, capture_output=True, check=False
        )
        if done.returncode != 2 or b"no alias missing is published" not in done.stderr:
            raise SystemExit(f"show of a missing alias answered {done}")

    contestants: dict[str, Callable[[], object]] = {
        "python": lambda: _run([PYTHON, "-c", "pass"]),
        "model": lambda: _run([PYTHON, "-c", FLOOR_MODEL]),
        "container": lambda: _run([PYTHON, "-c", FLOOR_CONTAINER]),
        "help": lambda: _run([CLI, "--help"]),
        "show": show,
        "show_missing": show_missing,
        "dry_run": lambda: _run(dry_run),
        "submit": submit,
        "metrics": metrics,
    }
    for action in contestants.values():  # warm: bytecode written, page cache filled
        action()
    times = rounds(contestants, repetitions)
    if _calls(site) - calls_before != repetitions + 1:
        raise SystemExit("submit did not call the sbatch stub once per submission")
    script = json.loads(_run(dry_run).stdout)["script"]
    base = times["python"]
    figures = {
        "cli_help_vs_python": times["help"] / base,
        "floor_model_vs_python": times["model"] / base,
        "floor_container_vs_python": times["container"] / base,
        "show_vs_python": times["show"] / base,
        "show_missing_vs_python": times["show_missing"] / base,
        "dry_run_vs_python": times["dry_run"] / base,
        "submit_vs_python": times["submit"] / base,
        "metrics_vs_python": times["metrics"] / base,
    }
    return figures | {"python_ms": base * 1000}, script


def _calls(site: Site) -> int:
    if not site.sbatch_calls.exists():
        return 0
    return len(site.sbatch_calls.read_text().splitlines())


# -- the scheduler and the store -------------------------------------------------------------


class CountingSubmitter:
    """A ``BatchSubmitter`` that counts every call reaching the scheduler."""

    def __init__(self, inner: FakeSubmitter) -> None:
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return attribute(*args, **kwargs)

        return counted


def scheduler_calls_per_poll(site: Site, jobs: int) -> int:
    """Submit ``jobs`` attempts, leave them RUNNING, and count the calls of one poll."""
    fake = FakeSubmitter()
    counting = CountingSubmitter(fake)
    submit = site.fake.container.submit(submitter=counting)
    ids = site.staged(jobs, site.fake)
    for lifecycle_id in ids:
        fake.start(submit.staged(lifecycle_id).job_id)
    store = LocalStore(str(site.root))
    wait = Wait(Observe(store, counting), SystemClock(), sleep=lambda _: None)
    counting.calls = 0
    result = wait(ids, timeout_s=0)
    if len(result.lifecycles) != jobs or not result.timed_out:
        raise SystemExit("the poll did not see every job running")
    return counting.calls


def publications(site: Site, count: int) -> tuple[float, list[str]]:
    """Publications per second: finished attempts published one after another; and the
    aliases they published."""
    sqsh = b"hsqs" + bytes(60) + os.urandom(4096)
    names = [f"pub{i:03d}" for i in range(count)]
    ids = [site.publish_finished(name, sqsh) for name in names]

    def publish_all() -> None:
        for lifecycle_id in ids:
            site.publish(lifecycle_id)

    elapsed = _timed(publish_all)
    return count / elapsed, names


# -- the job ---------------------------------------------------------------------------------


def job_figures(base: Path, repetitions: int) -> dict[str, float]:
    image = bench_image(base)
    size = image.stat().st_size
    site = JobSite(base / "site")

    def run_job() -> None:
        ran = site.run(site.stage("inspect_sqsh", str(image)))
        if ran.returncode != 0:
            raise SystemExit(f"the job failed ({ran.returncode}): {ran.stderr}")

    def bare() -> None:
        scratch = bare_scratch(site, f"bare{site.jobs}")
        site.jobs += 1
        env = site.enroot_environment(scratch)
        enroot = str(site.bin / "enroot")
        _run([enroot, "create", "--name", "bare", str(image)], env=env)
        _run([enroot, "start", "--root", "bare", "python3", "-c", "pass"], env=env)
        _run([enroot, "remove", "-f", "bare"], env=env)
        remove(scratch)

    run_job()
    bare()
    times = rounds({"job": run_job, "bare": bare}, repetitions)
    return {
        "job_vs_bare_enroot": times["job"] / times["bare"],
        "sqsh_reads_in_job": sqsh_reads(site, site.stage("inspect_sqsh", str(image)), image, size),
    }


READ = re.compile(r"^\d+\s+(?:read|pread64|readv|preadv|preadv2)\((\d+)<([^>]*)>.*\)\s+=\s+(\d+)$")


def sqsh_reads(site: JobSite, staged: Staged, image: Path, size: int) -> float:
    """Bytes read from the image or any ``.sqsh`` the job made of it, per image size (strace:
    every process and thread of the job, Enroot's included)."""
    trace = site.base / f"strace-{site.jobs}.log"
    spool, job_id = site.spool(staged)
    done = subprocess.run(
        [
            *("strace", "-f", "-qq", "-y", "-s", "0"),
            *("-e", "trace=read,pread64,readv,preadv,preadv2", "-e", "signal=none"),
            *("-o", str(trace), str(spool)),
        ],
        cwd=staged.job_dir,
        env=site.environment(job_id),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the traced job failed ({done.returncode}): {done.stderr}")
    total = 0
    for line in trace.read_text().splitlines():
        match = READ.match(line)
        if match and (match.group(2) == str(image) or match.group(2).endswith(".sqsh")):
            total += int(match.group(3))
    return total / size


# -- the big image ---------------------------------------------------------------------------


def layer_cache_offered() -> bool:
    """Whether this build's profile knows ``[enroot] layer_cache`` (a private Enroot cache that
    persists between the jobs of one workspace, on by default where it exists)."""
    from slurm_image.domain.errors import InvalidProfile
    from slurm_image.domain.profile import parse_profile

    build = {"partition": "p", "cpus_per_task": 1, "memory": "1G", "time_limit": "1:00:00"}
    document = {"workspace_root": "/srv/ws", "image_build": build, "enroot": {"layer_cache": False}}
    try:
        parse_profile(document)
    except InvalidProfile:
        return False
    return True


def fuse_user() -> int | None:
    """The uid the big jobs run as: an ordinary user's, on a node whose /dev/fuse users may
    open (the overlay path), when the bench runs as root on a machine with the FUSE tools;
    else None (the bench's own user: root's job unpacks)."""
    tools = ("squashfuse", "fuse-overlayfs", "fusermount3", "setpriv", "unshare")
    if os.geteuid() != 0 or not Path("/dev/fuse").exists():
        return None
    return ORDINARY_UID if all(shutil.which(tool) for tool in tools) else None


def phase_seconds(ran: Ran) -> dict[str, float]:
    """How long the job spent in each phase of its progress record (first seen to the next)."""
    ordered = sorted(ran.phases.items(), key=lambda item: item[1])
    ends = [start for _, start in ordered[1:]] + [ran.seconds] * bool(ordered)
    return {phase: end - start for (phase, start), end in zip(ordered, ends, strict=True)}


def big_figures(
    base: Path, count: int, log: Callable[[str], None], *, as_root: bool = False
) -> dict[str, float]:
    """The product's import job of a big image against a bare ``enroot import`` of it, and the
    job of a second image sharing its bottom layer against the first's; every round in a fresh
    workspace (so a layer cache, where the build has one, starts empty), the order of the job
    and the bare import alternating (ABAB), the second import right after the first. The jobs
    and bare imports run as an ordinary user where the node allows (``fuse_user``), or as root
    with ``as_root``."""
    spec = BigImageSpec()
    images = big_images(spec, log)
    cache = layer_cache_offered()
    user = None if as_root else fuse_user()
    samples: dict[str, list[float]] = {"bare": [], "first": [], "second": []}
    rss: dict[str, list[int]] = {name: [] for name in samples}
    phases: dict[str, dict[str, list[float]]] = {"bare": {}, "first": {}, "second": {}}
    paths: set[str] = set()

    def job(site: JobSite, name: str, reference: str) -> None:
        staged = site.stage("import_oci", reference)
        ran = site.run(staged)
        if ran.returncode != 0 or not staged.result.is_file():
            raise SystemExit(
                f"the import job of {reference} failed ({ran.returncode}): {ran.stderr}"
            )
        path = json.loads(staged.inspection_path.read_text())["path"]
        paths.add(path)
        spent = phase_seconds(ran)
        log(
            f"{name}: {ran.seconds:.1f} s, peak RSS {ran.peak_rss_kib // 1024} MiB, {path} path; "
            + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in spent.items())
        )
        samples[name].append(ran.seconds)
        rss[name].append(ran.peak_rss_kib)
        for phase, seconds in spent.items():
            phases[name].setdefault(phase, []).append(seconds)
        remove(staged.job_dir)

    def bare(site: JobSite) -> None:
        scratch = bare_scratch(site, "bare")
        env = site.enroot_environment(scratch, ENROOT_ALLOW_HTTP="yes", ENROOT_MAX_PROCESSORS="2")
        output = scratch / "bare.sqsh"
        argv = [str(site.bin / "enroot"), "import", "-a", platform.machine(), "-o", str(output)]
        ran = run_measured(
            site.command([*argv, parse_reference(images.first).enroot_uri]),
            env=env,
            cwd=scratch,
            markers=ENROOT_IMPORT_MARKERS,
            first_phase="download",
        )
        if ran.returncode != 0 or not output.is_file():
            raise SystemExit(f"the bare import failed ({ran.returncode}): {ran.stderr}")
        spent = phase_seconds(ran)
        log(
            f"bare: {ran.seconds:.1f} s, peak RSS {ran.peak_rss_kib // 1024} MiB; "
            + ", ".join(f"{phase} {seconds:.1f} s" for phase, seconds in spent.items())
        )
        for phase, seconds in spent.items():
            phases["bare"].setdefault(phase, []).append(seconds)
        samples["bare"].append(ran.seconds)
        rss["bare"].append(ran.peak_rss_kib)
        remove(scratch)

    for number in range(count):
        site = JobSite(
            base / f"round{number}",
            enroot={"environment": {"ENROOT_ALLOW_HTTP": "yes"}},
            user=user,
        )
        log(f"round {number + 1} of {count} in {site.base}, as uid {user or 0}")
        if number % 2 == 0:
            bare(site)
        job(site, "first", images.first)
        job(site, "second", images.second)
        if number % 2 == 1:
            bare(site)
        remove(site.base)
    median = {name: statistics.median(values) for name, values in samples.items()}
    peak = {name: statistics.median(values) / 1024 for name, values in rss.items()}
    figures = {
        "big_image_gb": images.tar_bytes / 1e9,
        "big_image_entries": images.entries,
        "big_image_compressed_gb": images.compressed_bytes / 1e9,
        "big_rounds": count,
        "big_layer_cache": int(cache),
        "big_overlay_path": int(paths == {"overlay"}),
        "big_bare_import_s": median["bare"],
        "big_job_s": median["first"],
        "big_second_job_s": median["second"],
        "big_job_vs_bare_import": median["first"] / median["bare"],
        "big_second_vs_first_job": median["second"] / median["first"],
        "big_bare_peak_rss_mib": peak["bare"],
        "big_job_peak_rss_mib": peak["first"],
        "big_second_peak_rss_mib": peak["second"],
    }
    for name, spent in phases.items():
        for phase, values in spent.items():
            figures[f"big_{name}_{phase.replace('-', '_')}_s"] = statistics.median(values)
    return figures


# -- the run ---------------------------------------------------------------------------------


class Sizes(NamedTuple):
    """How much each part of the small workloads does."""

    command_rounds: int
    hash_mib: int
    aliases: int
    publications: int
    hash_rounds: int
    job_rounds: int
    history_events: int
    gateway: LoadSizes


SIZES = {
    "smoke": Sizes(1, 16, 20, 3, 1, 1, 100, LoadSizes(2, 50, 50, 0, 50, 1, 50)),
    "quick": Sizes(5, 256, 1000, 20, 5, 5, 50000, LoadSizes(2, 50, 3000, 100, 50, 5, 10000)),
    "full": Sizes(11, 1024, 1000, 100, 9, 9, 50000, LoadSizes(2, 50, 10000, 100, 200, 11, 10000)),
}


def small_figures(base: Path, sizes: Sizes) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    site = Site(base / "site")
    sqsh = b"hsqs" + bytes(60) + os.urandom(1 << 16)
    names = [f"alias{i:04d}" for i in range(sizes.aliases)]
    site.publish(site.publish_finished(names[0], sqsh))
    for name in names[1:]:
        site.alias(name)
    per_second, published = publications(site, sizes.publications)
    figures["scheduler_calls_per_poll_100_jobs"] = scheduler_calls_per_poll(site, 100)
    site.long_history(sizes.history_events)
    startup, script = commands(
        site, sizes.command_rounds, names[len(names) // 2], len(names) + len(published)
    )
    figures |= startup
    figures |= gateway_figures(base, site, names + published, sizes)
    big = base / "large.bin"
    with big.open("wb") as handle:
        for _ in range(sizes.hash_mib):
            handle.write(os.urandom(1 << 20))
    figures |= hashing(big, script, sizes.hash_rounds)
    big.unlink()
    (base / "job").mkdir()
    figures |= job_figures(base / "job", sizes.job_rounds)
    figures["publish_per_second"] = per_second
    return figures


def gateway_figures(base: Path, site: Site, names: list[str], sizes: Sizes) -> dict[str, Any]:
    """The gateway over ``site``'s store (its aliases ``names``) under load, beside the command
    line's ``show``, and ten requesters' imports of one digest (bench/gateway.py)."""
    shown = Catalog(site, names)
    listed = shown
    if sizes.gateway.list_aliases:
        other = Site(base / "list-site")
        listed = Catalog(other, [f"alias{i:04d}" for i in range(sizes.gateway.list_aliases)])
        other.publish(other.publish_finished(listed.names[0], b"hsqs" + bytes(60) + b"list"))
        for name in listed.names[1:]:
            other.alias(name)
    figures = under_load(shown, listed, sizes.gateway, cli=CLI, env=ENV, rounds=rounds)
    large = Site(base / "large-site")
    names = [f"alias{i:05d}" for i in range(sizes.gateway.listing_aliases)]
    large.publish(large.publish_finished(names[0], b"hsqs" + bytes(60) + b"large"))
    large.copies(names[0], names[1:])
    count = sizes.gateway.rounds
    figures |= full_listing(Catalog(large, names), cli=CLI, env=ENV, rounds=rounds, count=count)
    return figures | coalescing_figures(base / "coalescing")


def gateway_alone(base: Path, sizes: Sizes) -> dict[str, Any]:
    """``gateway_figures`` on a store of ``sizes.aliases`` aliases built for them."""
    site = Site(base / "site")
    names = [f"alias{i:04d}" for i in range(sizes.aliases)]
    site.publish(site.publish_finished(names[0], b"hsqs" + bytes(60) + os.urandom(1 << 16)))
    for name in names[1:]:
        site.alias(name)
    return gateway_figures(base, site, names, sizes)


def _progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


NEEDED = {
    "openssl": "openssl",
    "mksquashfs": "squashfs-tools",
    "unsquashfs": "squashfs-tools",
    "strace": "strace",
    "/bin/busybox": "busybox-static",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer rounds, smaller files")
    size.add_argument("--smoke", action="store_true", help="one round, small inputs: runs?")
    big = parser.add_mutually_exclusive_group()
    big.add_argument("--big", action="store_true", help="add the big-image workload")
    big.add_argument("--big-only", action="store_true", help="only the big-image workload")
    parser.add_argument("--big-rounds", type=int, default=2, help="rounds of the big workload")
    parser.add_argument(
        "--big-as-root",
        action="store_true",
        help="run the big jobs as root (the unpack path) even where an ordinary user's would mount",
    )
    big.add_argument(
        "--gateway-only", action="store_true", help="only the gateway's figures (a store built)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    missing = sorted({package for tool, package in NEEDED.items() if not shutil.which(tool)})
    if missing:
        raise SystemExit(f"bench/run.py needs: apt-get install {' '.join(missing)}")
    sizes = SIZES["smoke" if args.smoke else "quick" if args.quick else "full"]
    started = time.perf_counter()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="slurm-image-bench-") as tmp:
        base = Path(tmp)
        # A root job runs the image's side as an unprivileged id, which must reach the stand-in.
        base.chmod(0o755)
        if args.gateway_only:
            figures |= gateway_alone(base, sizes)
        elif not args.big_only:
            figures |= small_figures(base, sizes)
        if args.big or args.big_only:
            (base / "big").mkdir()
            figures |= big_figures(
                base / "big", args.big_rounds, log=_progress, as_root=args.big_as_root
            )
    figures["seconds"] = time.perf_counter() - started
    rounded = {key: round(value, 2) for key, value in figures.items()}
    if args.json:
        print(json.dumps(rounded, sort_keys=True))
        return 0
    for key, value in rounded.items():
        goal = GOALS.get(key)
        verdict = ""
        if goal is not None:
            kind, bound = goal
            met = (
                value >= bound
                if kind == ">="
                else value <= bound
                if kind == "<="
                else value == bound
            )
            verdict = f"  (goal {kind} {bound}: {'met' if met else 'MISSED'})"
        print(f"{key:36} {value}{verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
