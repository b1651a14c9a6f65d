"""The gateway's figures for ``bench/run.py``: ``slurm-image serve`` under load beside the command
line's own ``show``, and one job for many requesters.

- ``under_load``: a real ``slurm-image serve --workers N`` (the console script, processes of its
  own) on a unix socket in the bench's directory, over a store the bench's user owns (the in-memory
  scheduler, ``[submitter] kind = "fake"``). Clients ask it at once, each over one kept-alive
  connection, from one asyncio loop in this process (``raw_http``, the least client that reads
  the gateway's answers, so that the cores go to the gateway);
  each request is timed from sending it to its whole answer read. ``show`` (``GET
  /v1/aliases/NAME``, every name in turn) and ``list`` (``GET /v1/aliases?limit=1000``: the
  whole catalog's summaries, up to 1,000 aliases) are loads of their own, one after the other;
  ``show`` three times: cold (every alias once, the first read of each since the gateway
  started), then, on the catalog's index as a gateway serving for a while holds it, closed
  (each client asks again once answered: the most it serves) and paced (500 a second offered,
  each latency counted from when its request was due: the latency at the goal's rate). The CPU
  time the server (all its processes) and this process spent during a load, over its wall
  time, says which side was saturated. Beside it, in rounds, the command
  line's ``show NAME --json`` (a process, as ``show_vs_python`` runs it) and one ``show`` of an
  idle gateway.
- ``full_listing``: the whole catalog of a large store read page by page (``GET
  /v1/aliases?limit=1000``, then each ``next``) by one client of an idle gateway, beside the
  command line's ``list --json`` of the same store: the bytes each answers and its wall time.
- ``coalescing``: ten requesters import one digest at once through the gateway's application
  (``gateway.app``, the one ``slurm-image serve`` serves) served by uvicorn in a
  thread of this process on a loopback port: over the unix socket the kernel would name the
  bench's one account for all ten, so each request carries a MUNGE credential of its own
  requester, made by the product's in-memory munged (``adapters.memory``). Once all ten have
  ordered, the one job is completed as the node would leave it, and each waiting client has its
  alias published; the jobs the scheduler received are counted.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import pwd
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import uvicorn
from dependency_injector import providers
from raw_http import Connection, NotUnderstood
from workloads import SOURCE, Site, chain_record, inspection

from slurm_image.adapters.gateway_client.exchange import Gateway as Address
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.adapters.memory import FakeSubmitter, MemoryAccounts, MemoryMunge
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.application.lifecycle import Outcome
from slurm_image.composition.api import Lifecycles
from slurm_image.domain.plan import load_plan
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.gateway.app import create_app
from slurm_image.gateway.serve import Listener, bind
from slurm_image.gateway.state import Gateway
from slurm_image.gateway.who import Who

GATEWAY_SETTINGS = """
[gateway]
# The bench asks everything as one account over the socket: its request rate is not measured.
requests_per_minute = 1000000
"""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PACED_RATE = 500.0
"""``show`` requests a second of the paced load (the goal's rate)."""
BASE_URL = "http://gateway"


class LoadSizes(NamedTuple):
    """How much the gateway's workloads do."""

    workers: int
    """``serve --workers``"""
    clients: int
    show_requests: int
    list_aliases: int
    """aliases of a store of its own that ``list`` is measured on (0: the show store)"""
    list_requests: int
    rounds: int
    """rounds of the command line's ``show`` beside an idle gateway's"""
    listing_aliases: int
    """aliases of the store ``full_listing`` reads"""


@dataclass(frozen=True)
class Load:
    """One load: every request's latency (s), its wall time, and the CPU seconds the server
    and the client (this process) spent meanwhile."""

    latencies: list[float]
    seconds: float
    server_cpu_s: float
    client_cpu_s: float

    def figures(self, kind: str) -> dict[str, float]:
        count = len(self.latencies)
        return {
            f"gateway_{kind}_per_second": count / self.seconds,
            f"gateway_{kind}_p50_ms": percentile(self.latencies, 0.50) * 1000,
            f"gateway_{kind}_p99_ms": percentile(self.latencies, 0.99) * 1000,
            f"gateway_{kind}_server_cpu": self.server_cpu_s / self.seconds,
            f"gateway_{kind}_client_cpu": self.client_cpu_s / self.seconds,
            f"gateway_{kind}_server_cpu_ms": self.server_cpu_s / count * 1000,
        }


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest of ``values`` that at least ``fraction`` of
    them do not exceed."""
    ordered = sorted(values)
    rank = max(1, math.ceil(round(len(ordered) * fraction, 9)))
    return ordered[rank - 1]


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` (all its threads) and its living children
    have spent so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    own = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return own + sum(cpu_seconds(child) for child in _children(pid))


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the thread or the process has ended
            continue
    return found


# -- the gateway under load -------------------------------------------------------------------


def gateway_profile(site: Site) -> Path:
    """``site``'s profile of the in-memory scheduler, with a ``[gateway]`` section."""
    path = site.base / "gateway.toml"
    path.write_text(site.fake_profile.read_text() + GATEWAY_SETTINGS)
    return path


@contextmanager
def served(
    cli: str, profile: Path, sock: Path, env: dict[str, str], workers: int = 1
) -> Iterator[int]:
    """``slurm-image --profile PROFILE serve --listen unix:SOCK --workers N`` while the block
    runs, then SIGTERM (as systemd stops it); yields its pid once it answers ``/healthz``."""
    log = sock.parent / f"{sock.stem}.log"
    serve = ["serve", "--listen", f"unix:{sock}", "--workers", str(workers)]
    with log.open("wb") as output:
        server = subprocess.Popen(
            [cli, "--profile", str(profile), *serve],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        _await_health(sock, server, log)
        yield server.pid
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.returncode not in (0, -signal.SIGTERM):
            raise SystemExit(f"slurm-image serve exited {server.returncode}: {log.read_text()}")


def _await_health(sock: Path, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    with _client(sock) as client:
        while True:
            if server.poll() is not None:
                raise SystemExit(f"slurm-image serve exited {server.returncode}: {log.read_text()}")
            try:
                if client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"slurm-image serve did not answer in 60 s: {log.read_text()}")
            time.sleep(0.05)


def _client(sock: Path) -> httpx.Client:
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock), verify=False), base_url=BASE_URL, timeout=60
    )


class LoadFailed(Exception):
    """A request of a load answered what it should not have."""


Check = Callable[[str, Any], None]
"""What a request of a load must have answered: its path and its answer's JSON."""


async def _load(
    pid: int,
    sock: Path,
    path: Callable[[int], str],
    clients: int,
    requests: int,
    check: Check,
    rate: float | None = None,
) -> Load:
    """``requests`` GETs of ``path(i)``, asked by ``clients`` concurrent clients, each over a
    connection of its own, of the server ``pid``: each client's next as soon as its last is
    answered, or with ``rate``, request ``i`` due at ``i / rate`` s from the start (a client
    free by then sends it; its latency counts from when it was due, so a server that falls
    behind is charged its queue)."""
    latencies: list[float] = []
    issued = 0
    began = time.perf_counter()
    connections = [await Connection.open(sock) for _ in range(clients)]

    async def client(connection: Connection) -> None:
        nonlocal issued
        checked = False
        while issued < requests:
            target = path(issued)
            start = time.perf_counter()
            if rate is not None:
                due = began + issued / rate
                issued += 1
                if due > start:
                    await asyncio.sleep(due - start)
                start = due
            else:
                issued += 1
            status, body = await connection.get(target)
            latencies.append(time.perf_counter() - start)
            if status != 200:
                raise LoadFailed(f"GET {target} answered {status}: {body[:500]!r}")
            if not checked:  # each client's first answer read whole: what was served
                check(target, json.loads(body))
                checked = True

    try:
        server, this = cpu_seconds(pid), time.process_time()
        start = began = time.perf_counter()
        await asyncio.gather(*(client(connection) for connection in connections))
        seconds = time.perf_counter() - start
        server, this = cpu_seconds(pid) - server, time.process_time() - this
        return Load(latencies, seconds, server_cpu_s=server, client_cpu_s=this)
    finally:
        for connection in connections:
            await connection.close()


def load(
    pid: int,
    sock: Path,
    path: Callable[[int], str],
    clients: int,
    requests: int,
    check: Check,
    rate: float | None = None,
) -> Load:
    """``requests`` GETs of ``path(i)`` by ``clients`` concurrent clients of the server
    ``pid`` (at most ``rate`` a second when given): the latencies, and the CPU time each side
    spent meanwhile."""
    try:
        return asyncio.run(_load(pid, sock, path, clients, requests, check, rate))
    except (LoadFailed, NotUnderstood) as failed:
        raise SystemExit(f"the gateway under load: {failed}") from None


class Catalog(NamedTuple):
    """A store the gateway serves: its site, and every alias published in it."""

    site: Site
    names: Sequence[str]


def _shown(target: str, answer: Any) -> None:
    name = target.rsplit("/", 1)[1]
    if answer["record"]["name"] != name:
        raise LoadFailed(f"the gateway's show of {name} answered {answer}")


def _listing(catalog: Catalog) -> Check:
    def check(_: str, answer: Any) -> None:
        names = sorted(summary["name"] for summary in answer["images"])
        if names != sorted(catalog.names):
            raise LoadFailed(f"the gateway listed {len(names)} aliases of {len(catalog.names)}")

    return check


def under_load(
    shown: Catalog,
    listed: Catalog,
    sizes: LoadSizes,
    *,
    cli: str,
    env: dict[str, str],
    rounds: Callable[[dict[str, Callable[[], object]], int], dict[str, float]],
) -> dict[str, float]:
    """The gateway over ``shown`` under ``show`` load (every alias in turn), and over
    ``listed`` (the same store, or another gateway's) under ``list`` load; beside them, the
    command line's ``show`` and an idle gateway's, timed by ``rounds`` as bench/run.py times
    its contestants."""
    names = shown.names
    middle = names[len(names) // 2]
    sock = shown.site.base / "gateway.sock"
    profile = gateway_profile(shown.site)
    with served(cli, profile, sock, env, sizes.workers) as pid, _client(sock) as idle:

        def cli_show() -> None:
            done = subprocess.run(
                [cli, "--profile", str(shown.site.fake_profile), "show", middle, "--json"],
                env=env,
                capture_output=True,
                check=False,
            )
            if done.returncode != 0 or json.loads(done.stdout)["name"] != middle:
                raise SystemExit(f"slurm-image show answered {done}")

        def idle_show() -> None:
            answer = idle.get(f"/v1/aliases/{middle}")
            if answer.status_code != 200:
                raise SystemExit(f"the gateway's show answered {answer.status_code}")
            _shown(f"/v1/aliases/{middle}", answer.json())

        contestants: dict[str, Callable[[], object]] = {"cli": cli_show, "idle": idle_show}
        for action in contestants.values():  # warm: bytecode, page cache, the first request
            action()
        times = rounds(contestants, sizes.rounds)
        every = len(names)  # each alias's first show reads its file: the index is cold
        cold = load(pid, sock, lambda i: f"/v1/aliases/{names[i]}", sizes.clients, every, _shown)
        show = load(
            pid,
            sock,
            lambda i: f"/v1/aliases/{names[i % len(names)]}",
            sizes.clients,
            sizes.show_requests,
            _shown,
        )
        paced = load(
            pid,
            sock,
            lambda i: f"/v1/aliases/{names[i % len(names)]}",
            sizes.clients,
            sizes.show_requests,
            _shown,
            rate=PACED_RATE,
        )
        if listed.site is shown.site:
            listing = _list_load(pid, sock, listed, sizes)
    if listed.site is not shown.site:
        list_sock = listed.site.base / "gateway.sock"
        with served(cli, gateway_profile(listed.site), list_sock, env, sizes.workers) as list_pid:
            listing = _list_load(list_pid, list_sock, listed, sizes)
    figures = show.figures("show") | paced.figures("show_paced") | listing.figures("list")
    figures |= cold.figures("show_cold")
    figures["gateway_list_aliases"] = len(listed.names)
    figures["gateway_cli_show_ms"] = times["cli"] * 1000
    figures["gateway_idle_show_ms"] = times["idle"] * 1000
    figures["gateway_show_vs_cli"] = figures["gateway_show_p50_ms"] / figures["gateway_cli_show_ms"]
    paced_p50 = figures["gateway_show_paced_p50_ms"]
    figures["gateway_show_paced_vs_cli"] = paced_p50 / figures["gateway_cli_show_ms"]
    figures["gateway_clients"] = sizes.clients
    figures["gateway_workers"] = sizes.workers
    return figures


def _list_load(pid: int, sock: Path, catalog: Catalog, sizes: LoadSizes) -> Load:
    requests = sizes.list_requests
    page = "/v1/aliases?limit=1000"
    return load(pid, sock, lambda _: page, sizes.clients, requests, _listing(catalog))


# -- the whole catalog of a large store ------------------------------------------------------


def full_listing(
    catalog: Catalog,
    *,
    cli: str,
    env: dict[str, str],
    rounds: Callable[[dict[str, Callable[[], object]], int], dict[str, float]],
    count: int,
) -> dict[str, float]:
    """The whole catalog of ``catalog`` read page by page from an idle gateway, and by the
    command line's ``list --json``, in ``count`` rounds: the bytes of each and its median
    wall time."""
    sock = catalog.site.base / "listing.sock"
    wanted = sorted(catalog.names)
    sizes: dict[str, int] = {}
    with served(cli, gateway_profile(catalog.site), sock, env), _client(sock) as http:

        def gateway_list() -> None:
            names: list[str] = []
            size = pages = 0
            after: str | None = None
            while True:
                query = "limit=1000" + (f"&after={after}" if after else "")
                answer = http.get(f"/v1/aliases?{query}")
                if answer.status_code != 200:
                    raise SystemExit(f"the gateway's list answered {answer.status_code}")
                size += len(answer.content)
                pages += 1
                page = answer.json()
                names += [image["name"] for image in page["images"]]
                after = page["next"]
                if after is None:
                    break
            if sorted(names) != wanted:
                raise SystemExit(f"the gateway listed {len(names)} aliases of {len(wanted)}")
            sizes["gateway"], sizes["pages"] = size, pages

        def cli_list() -> None:
            done = subprocess.run(
                [cli, "--profile", str(catalog.site.fake_profile), "list", "--json"],
                env=env,
                capture_output=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"slurm-image list answered {done}")
            listed = json.loads(done.stdout)
            if len(listed["images"]) != len(wanted):
                raise SystemExit(f"slurm-image list listed {len(listed['images'])} aliases")
            sizes["cli"] = len(done.stdout)

        gateway_list()  # warm: the process's index, the page cache
        times = rounds({"gateway": gateway_list, "cli": cli_list}, count)
    return {
        "listing_aliases": len(wanted),
        "listing_gateway_pages": sizes["pages"],
        "listing_gateway_bytes": sizes["gateway"],
        "listing_gateway_s": times["gateway"],
        "listing_cli_bytes": sizes["cli"],
        "listing_cli_s": times["cli"],
    }


# -- one job for many requesters --------------------------------------------------------------

COALESCING_PROFILE = """workspace_root = "{root}"

[image_build]
partition = "cpu"
cpus_per_task = 1
memory = "1G"
time_limit = "0:10:00"
arch = "{arch}"

[submitter]
kind = "fake"

[gateway]
requests_per_minute = 1000000
"""
SQSH = b"hsqs" + bytes(60) + b"the image the one job built"
FIRST_UID = 23000


class Coalesced(NamedTuple):
    jobs: int
    joined_s: float
    """from the ten requests sent until every one had ordered (been answered)"""
    published_s: float
    """from the one job's end until every requester had its alias"""


def coalescing(base: Path, requesters: int = 10, deadline_s: float = 120.0) -> Coalesced:
    """``requesters`` accounts import one digest at once through the gateway (see the module
    docstring); every one must get its own alias of the one artifact."""
    base.mkdir(mode=0o755)
    root = base / "ws"
    root.mkdir(mode=0o755)
    arch = "x86_64"  # the architecture the bench's inspection records name
    profile = base / "site.toml"
    profile.write_text(COALESCING_PROFILE.format(root=root, arch=arch))
    accounts = MemoryAccounts()
    uid = os.getuid()
    try:
        service = pwd.getpwuid(uid).pw_name
    except KeyError:
        service = str(uid)
    accounts.add_user(service, uid, os.getgid())
    users = {f"requester{i}": FIRST_UID + i for i in range(requesters)}
    for user, user_uid in users.items():
        accounts.add_user(user, user_uid, user_uid)
        accounts.add_group(user, user_uid)
    lifecycles = Lifecycles.from_profile(str(profile), environ={})
    lifecycles.container.accounts.override(providers.Object(accounts))
    lifecycles.open_store()
    scheduler = lifecycles.container.submitter()
    assert isinstance(scheduler, FakeSubmitter)
    munge = MemoryMunge(clock=SystemClock())
    who = Who(accounts, munge.authenticator(), plain_http_ok=True)
    app = create_app(Gateway(lifecycles=lifecycles, who=who))
    sock = bind(Listener("http", host="127.0.0.1", port=0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[sock])), name="gateway", daemon=True
    )
    thread.start()
    layout = StoreLayout(str(root))
    outcomes: dict[str, Outcome | BaseException] = {}
    try:
        _await(lambda: bool(server.started), deadline_s, "the gateway did not start")

        def ask(user: str) -> None:
            client = RemoteLifecycles(
                Address(f"http://127.0.0.1:{port}"),
                credential_source=munge.source(users[user], users[user]),
            )
            try:
                outcomes[user] = client.import_image(
                    SOURCE, name=f"coalesced-{user}", role="client", wait=True, timeout_s=deadline_s
                )
            except BaseException as error:  # reported below with the others
                outcomes[user] = error

        books = lifecycles.container.orders()

        def ordered() -> int:
            return sum(len(book.orders) for book in books.open_books())

        askers = [threading.Thread(target=ask, args=(user,)) for user in users]
        start = time.perf_counter()
        for asker in askers:
            asker.start()
        _await(
            lambda: ordered() >= requesters or len(outcomes) == requesters,
            deadline_s,
            f"{requesters} requests did not all order in {deadline_s} s",
        )
        joined_s = time.perf_counter() - start
        ended = time.perf_counter()
        for book in books.open_books():
            plan = load_plan((Path(layout.jobs) / book.lifecycle_id / "plan.json").read_bytes())
            job_dir = Path(plan.paths.job_dir)
            (job_dir / "architecture").write_text(f"{arch}\n")
            Path(plan.paths.sqsh).write_bytes(SQSH)
            (job_dir / "chain.json").write_bytes(chain_record(str(plan.source_digest)))
            Path(plan.paths.result).write_bytes(inspection("client", SQSH))
            for job in scheduler.jobs.values():
                if job.spec.comment == plan.marker:
                    scheduler.finish(job.job_id, 0)
        for asker in askers:
            asker.join(timeout=deadline_s)
        published_s = time.perf_counter() - ended
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    published = {
        user: outcome.published
        for user, outcome in outcomes.items()
        if isinstance(outcome, Outcome) and outcome.published is not None
    }
    if set(published) != set(users):
        raise SystemExit(f"not every coalesced import published: {outcomes}")
    if {record.name for record in published.values()} != {f"coalesced-{u}" for u in users}:
        raise SystemExit(f"the coalesced imports published {[r.name for r in published.values()]}")
    if len({record.sqsh_sha256 for record in published.values()}) != 1:
        raise SystemExit("the coalesced imports' aliases name different artifacts")
    return Coalesced(len(scheduler.jobs), joined_s, published_s)


def _await(ready: Callable[[], bool], deadline_s: float, what: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not ready():
        if time.monotonic() > deadline:
            raise SystemExit(what)
        time.sleep(0.01)


def coalescing_figures(base: Path) -> dict[str, float]:
    coalesced = coalescing(base)
    return {
        "gateway_coalesced_jobs_for_10_imports": coalesced.jobs,
        "gateway_coalesce_joined_s": coalesced.joined_s,
        "gateway_coalesce_published_s": coalesced.published_s,
    }
