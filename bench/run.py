"""One benchmark of the whole product: every figure a ratio against a baseline of the same run.

Usage: .venv/bin/python bench/run.py [--quick | --smoke] [--big | --big-only | --gateway-only]
                                     [--json]

Run it with the interpreter of the environment the product is installed in (``pip install
.``; the test extra is not needed): it imports ``slurm_image`` as installed, times the
``slurm-image`` console script next to that interpreter, and runs the batch job the product
stages as slurmd does, with the Enroot stand-in of this repository (bench/batch.py). Nothing
but ``--big`` needs the local registry, and nothing the local Slurm cluster. Rounds run every
contestant once in turn, so a noisy neighbour slows a figure and its baseline alike; each
figure is a ratio of medians. Each benchmark is a module of bench/ named for what it measures
(startup.py, hash_throughput.py, scheduler_calls.py, publication_rate.py, inspect_job.py,
big_image.py, gateway.py), timed with timing.py; this file holds the command line and the goals.

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
                         once every alias has been shown (the catalog's index warm)
  gateway_show_cold_*    the same figures for the first ``show`` of each alias after the
                         gateway started (the index cold), before the others
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
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # the modules of bench/, each named for what it measures

from big_image import big_figures  # noqa: E402
from hash_throughput import hashing  # noqa: E402
from inspect_job import job_figures  # noqa: E402
from publication_rate import publications  # noqa: E402
from scheduler_calls import scheduler_calls_per_poll  # noqa: E402
from startup import commands  # noqa: E402
from timing import CLI, ENV, rounds, verdict  # noqa: E402
from workloads import Site  # noqa: E402

from gateway import (  # noqa: E402
    Catalog,
    LoadSizes,
    coalescing_figures,
    full_listing,
    under_load,
)

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
        print(f"{key:36} {value}{verdict(GOALS.get(key), value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
