"""One user's open log streams against everyone else's requests: ``slurm-image serve`` (the
console script, a process of its own, the in-memory scheduler) on a unix socket, over a store
with one published alias and one lifecycle whose job never ends.

Usage: .venv/bin/python bench/streams.py [--streams 300] [--shows 2000] [--clients 4] [--json]
       (as root: the streams' user is another account, ``nobody``, over the same socket)

1. Idle: ``--shows`` ``GET /v1/aliases/NAME`` by ``--clients`` concurrent clients, as the store's
   own account; their latencies.
2. A child process, as ``nobody``, opens ``--streams`` followed log streams
   (``GET /v1/lifecycles/ID/logs?follow=true``, each over a connection of its own, its answer's
   head read and then left open); the profile's caps are raised above that number so that every
   one of them is open (with the defaults, 16 are and the rest are answered 429). The same show
   load runs again while they are open.
3. The child closes every stream; the time until the gateway's open streams, its connections
   (its own gauge, and its file descriptors) and its busy threads (the gauges of ``/metrics``) are
   back where they were before the streams. Idle pool threads are not busy: the pool keeps them
   for the next request.

Figures: ``streams_open``, ``show_idle_p50_ms``/``p99``, ``show_streams_p50_ms``/``p99``,
``show_p99_vs_idle`` (goal <= 2), ``threads_during_streams`` (the gateway's threads while the
streams were open, against ``threads_before``), ``freed_s`` (goal <= 10).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/workloads.py, bench/gateway.py

from workloads import Site  # noqa: E402

from gateway import load, percentile, served  # noqa: E402

CLI = str(Path(sys.executable).parent / "slurm-image")
STREAMS_SETTINGS = """
[gateway]
requests_per_minute = 1000000
max_streams = {cap}
max_streams_per_user = {cap}
max_connections = {connections}
max_connections_per_peer = {connections}
"""
FOLLOWED = f"registry.example.org/team/app:2@sha256:{'7' * 64}"
"""The source of the lifecycle the streams follow (not in the store: its job is submitted)."""
GOALS = {"show_p99_vs_idle": 2.0, "freed_s": 10.0}


def gateway_gauges(http: Any) -> dict[str, float]:
    """The gateway's own gauges from its ``/metrics`` (asked as the store's account), without
    the ``slurm_image_gateway_`` prefix; the one connection asking is among them."""
    text = http.get("http://gateway/metrics").text
    gauges = {}
    for line in text.splitlines():
        if line.startswith("slurm_image_gateway_"):
            name, value = line.split("{", 1)[0], line.rsplit(" ", 1)[1]
            gauges[name.removeprefix("slurm_image_gateway_")] = float(value)
    return gauges


def threads(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/task").iterdir())


def descriptors(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def stream_holder(sock: Path, path: str, count: int, user: str | None) -> tuple[int, int, int]:
    """Fork a child (as ``user`` when given) that opens ``count`` streams of ``path`` and holds
    them until told to close; its pid, and the pipes that say how many opened and let it go."""
    opened_r, opened_w = os.pipe()
    release_r, release_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.close(opened_r)
        os.close(release_w)
        if user is not None:
            account = pwd.getpwnam(user)
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
        held, statuses = [], []
        for _ in range(count):
            connection = socket.socket(socket.AF_UNIX)
            connection.settimeout(60)
            connection.connect(str(sock))
            connection.sendall(f"GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n".encode())
            head = b""
            while b"\r\n" not in head:
                head += connection.recv(4096) or b"0 0"
            statuses.append(int(head.split(b" ", 2)[1]))
            held.append(connection)
        os.write(opened_w, json.dumps([statuses.count(200), len(statuses)]).encode())
        os.read(release_r, 1)
        for connection in held:
            connection.close()
        os._exit(0)
    os.close(opened_w)
    os.close(release_r)
    return child, opened_r, release_w


def measure(streams: int, shows: int, clients: int) -> dict[str, Any]:
    user = "nobody" if os.geteuid() == 0 else None
    with tempfile.TemporaryDirectory(prefix="slurm-image-bench-") as tmp:
        base = Path(tmp)
        base.chmod(0o755)
        site = Site(base / "site")
        name = "alias0000"
        site.publish(site.publish_finished(name, b"hsqs" + bytes(60) + os.urandom(1 << 16)))
        profile = base / "gateway.toml"
        connections = streams + 4 * clients + 64
        settings = STREAMS_SETTINGS.format(cap=streams + 8, connections=connections)
        profile.write_text(site.fake_profile.read_text() + settings)
        socket_dir = base / "run"
        socket_dir.mkdir(mode=0o755)
        sock = socket_dir / "gateway.sock"
        env = {**os.environ, "SLURM_IMAGE_PROFILE": str(profile)}
        with served(CLI, profile, sock, env) as pid:
            import httpx

            shown = f"/v1/aliases/{name}"

            def check(_: str, answer: Any) -> None:
                if answer["record"]["name"] != name:
                    raise SystemExit(f"show answered {answer}")

            # the lifecycle the streams follow, started through the gateway (its job never ends)
            with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock))) as http:
                body = {"operation": "import_oci", "source": FOLLOWED, "name": "followed"}
                started = http.post("http://gateway/v1/lifecycles", json=body | {"role": "client"})
                if started.status_code != 200:
                    raise SystemExit(f"the import answered {started.status_code}: {started.text}")
                lifecycle_id = started.json()["lifecycle_id"]
            load(pid, sock, lambda i: shown, clients, shows // 4, check)  # warm
            idle = load(pid, sock, lambda i: shown, clients, shows, check)
            http = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)))
            gateway_gauges(http)  # its connection is open from here on
            threads_before, fds_before = threads(pid), descriptors(pid)
            path = f"/v1/lifecycles/{lifecycle_id}/logs?follow=true"
            child, opened, release = stream_holder(sock, path, streams, user)
            open_count, asked = json.loads(os.read(opened, 64))
            busy = load(pid, sock, lambda i: shown, clients, shows, check)
            threads_during = threads(pid)
            try:
                during = gateway_gauges(http)
                closed_at = time.perf_counter()
                os.write(release, b"x")
                os.waitpid(child, 0)
                while True:
                    after = gateway_gauges(http)
                    settled = descriptors(pid) <= fds_before and after["open_streams"] == 0
                    if settled and after["open_connections"] <= 1 and after["busy_threads"] == 0:
                        break
                    if time.perf_counter() - closed_at > 60:
                        break
                    time.sleep(0.05)
                freed_s = time.perf_counter() - closed_at
            finally:
                http.close()
    idle_p99 = percentile(idle.latencies, 0.99)
    busy_p99 = percentile(busy.latencies, 0.99)
    return {
        "streams_asked": asked,
        "streams_open": open_count,
        "streams_user": user or "the bench's own account",
        "show_idle_p50_ms": percentile(idle.latencies, 0.5) * 1000,
        "show_idle_p99_ms": idle_p99 * 1000,
        "show_streams_p50_ms": percentile(busy.latencies, 0.5) * 1000,
        "show_streams_p99_ms": busy_p99 * 1000,
        "show_p99_vs_idle": busy_p99 / idle_p99,
        "threads_before": threads_before,
        "threads_during_streams": threads_during,
        "busy_threads_during_streams": during["busy_threads"],
        "open_streams_during": during["open_streams"],
        "open_connections_during": during["open_connections"],
        "freed_s": freed_s,
        "open_streams_after": after["open_streams"],
        "open_connections_after": after["open_connections"],
        "busy_threads_after": after["busy_threads"],
        "load_1min": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--shows", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args()
    figures = measure(args.streams, args.shows, args.clients)
    if args.json:
        print(json.dumps(figures, sort_keys=True))
        return 0
    for key, value in figures.items():
        shown = round(value, 2) if isinstance(value, float) else value
        goal = GOALS.get(key)
        verdict = ""
        if goal is not None:
            verdict = f"  (goal <= {goal}: {'met' if value <= goal else 'MISSED'})"
        print(f"{key:28} {shown}{verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
