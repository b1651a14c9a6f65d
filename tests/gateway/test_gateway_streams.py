"""The gateway's long answers and connections (docs/gateway.md, "Limits"): one user cannot take
what every user needs. Log streams and long polls hold no thread while they wait, are capped
per user and in all (429 with Retry-After), and are freed when their client goes away; a
connection is capped per peer, must send its request's head in time, and SIGTERM ends
everything within a bounded time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_lab import SOURCE, GatewayLab, eventually, gateway_lab
from slurm_image.wire.exit_codes import EXIT_BUSY


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("max_connections_per_peer = 2000\nheader_timeout_s = 1") as running:
        yield running


def raw_request(lab: GatewayLab, path: str, user: str) -> socket.socket:
    """A request sent over its own connection, its answer left unread."""
    port = int(lab.url.rsplit(":", 1)[1])
    connection = socket.create_connection(("127.0.0.1", port), timeout=30)
    connection.sendall(
        f"GET {path} HTTP/1.1\r\nHost: gateway\r\n"
        f"Authorization: Munge {lab.credential(user)}\r\n\r\n".encode()
    )
    return connection


def status_of(connection: socket.socket) -> int:
    head = b""
    while b"\r\n" not in head:
        piece = connection.recv(4096)
        if not piece:
            return 0
        head += piece
    return int(head.split(b" ", 2)[1])


def in_flight(lab: GatewayLab) -> str:
    """A lifecycle of alice's whose job never ends while the test runs."""
    return lab.client("alice").import_image(SOURCE, name="a", role="client").lifecycle_id


def open_answers(lab: GatewayLab) -> int:
    return int(lab.app.state.gateway.answers.open)


def test_one_user_with_300_follow_streams_takes_no_thread_and_others_are_answered(
    lab: GatewayLab,
) -> None:
    lifecycle_id = in_flight(lab)
    path = f"/v1/lifecycles/{lifecycle_id}/logs?follow=true"
    streams = [raw_request(lab, path, "alice") for _ in range(300)]
    try:
        statuses = [status_of(stream) for stream in streams]
        assert statuses.count(200) == 16, "max_streams_per_user is 16 by default"
        assert statuses.count(429) == 284
        assert open_answers(lab) == 16
        # meanwhile another user is answered at once, and so is /healthz
        bob = httpx.Client(base_url=lab.url, timeout=10)
        assert bob.get("/healthz").status_code == 200
        assert [s["name"] for s in lab.client("bob").catalog_summaries()] == []
        assert lab.client("bob").status([lifecycle_id])[0].lifecycle_id == lifecycle_id
    finally:
        for stream in streams:
            stream.close()
    assert eventually(lambda: open_answers(lab) == 0), "every stream freed after its client left"
    assert eventually(lambda: lab.threads_in_use() == 0), "and every thread"


def test_past_the_cap_the_answer_is_429_naming_the_limit_with_retry_after(
    lab: GatewayLab,
) -> None:
    lifecycle_id = in_flight(lab)
    path = f"/v1/lifecycles/{lifecycle_id}/logs?follow=true"
    held = [raw_request(lab, path, "alice") for _ in range(16)]
    try:
        assert [status_of(stream) for stream in held] == [200] * 16
        answer = httpx.get(
            lab.url + path, headers={"Authorization": f"Munge {lab.credential('alice')}"}
        )
        assert answer.status_code == 429
        assert int(answer.headers["Retry-After"]) >= 1
        error = answer.json()["error"]
        assert (error["field"], error["exit_code"]) == ("max_streams_per_user", EXIT_BUSY)
        # a long poll is a long answer too
        waited = httpx.post(
            lab.url + "/v1/lifecycles/wait",
            json={"lifecycle_ids": [lifecycle_id], "timeout_s": 1},
            headers={"Authorization": f"Munge {lab.credential('alice')}"},
        )
        assert waited.status_code == 429
        # bob has streams of his own
        bobs = raw_request(lab, path, "bob")
        assert status_of(bobs) == 200
        bobs.close()
    finally:
        for stream in held:
            stream.close()
    assert eventually(lambda: open_answers(lab) == 0)


def test_the_global_cap_holds_across_users() -> None:
    with gateway_lab("max_streams = 3\nmax_streams_per_user = 2") as lab:
        lifecycle_id = in_flight(lab)
        path = f"/v1/lifecycles/{lifecycle_id}/logs?follow=true"
        held = [raw_request(lab, path, user) for user in ("alice", "alice", "bob")]
        try:
            assert [status_of(stream) for stream in held] == [200, 200, 200]
            answer = httpx.get(
                lab.url + path, headers={"Authorization": f"Munge {lab.credential('carol')}"}
            )
            assert answer.status_code == 429
            assert answer.json()["error"]["field"] == "max_streams"
        finally:
            for stream in held:
                stream.close()


def test_more_long_polls_than_the_thread_pool_holds_leave_the_gateway_answering() -> None:
    """Each long poll waits 20 s: more of them than the thread pool's 256 threads would have
    stopped every other request while they waited, had each held a thread."""
    many = 256 + 20
    results: list[int] = []
    with gateway_lab(
        f"max_streams_per_user = {many}\nmax_streams = {many}\nmax_connections_per_peer = 2000"
    ) as lab:
        lifecycle_id = in_flight(lab)

        def poll() -> None:
            answer = httpx.post(
                lab.url + "/v1/lifecycles/wait",
                json={"lifecycle_ids": [lifecycle_id], "timeout_s": 20},
                headers={"Authorization": f"Munge {lab.credential('bob')}"},
                timeout=90,
            )
            results.append(answer.status_code)

        pollers = [threading.Thread(target=poll) for _ in range(many)]
        for poller in pollers:
            poller.start()
        assert eventually(lambda: open_answers(lab) >= 256, within_s=20)
        assert lab.threads_in_use() < 64, "a waiting long poll holds no thread"
        assert httpx.get(lab.url + "/healthz", timeout=10).status_code == 200
        assert [s["name"] for s in lab.client("carol").catalog_summaries()] == []
        for poller in pollers:
            poller.join(timeout=90)
        assert eventually(lambda: open_answers(lab) == 0)
    assert results.count(200) == many


def test_a_connection_that_sends_no_whole_request_head_is_closed(lab: GatewayLab) -> None:
    port = int(lab.url.rsplit(":", 1)[1])
    slow = socket.create_connection(("127.0.0.1", port), timeout=30)
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: gate")
    try:
        assert slow.recv(4096) == b"", "closed after header_timeout_s"
    finally:
        slow.close()


def test_connections_past_the_peers_cap_are_answered_429_and_closed() -> None:
    with gateway_lab("max_connections_per_peer = 3") as lab:
        held = []
        try:
            for _ in range(3):
                held.append(socket.socket(socket.AF_UNIX))
                held[-1].connect(lab.socket)
            refused = socket.socket(socket.AF_UNIX)
            refused.settimeout(30)
            refused.connect(lab.socket)
            answer = b""
            while piece := refused.recv(4096):
                answer += piece
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 429")
            assert b"retry-after:" in head.lower()
            error = json.loads(body)["error"]
            assert (error["field"], error["exit_code"]) == ("max_connections_per_peer", EXIT_BUSY)
            refused.close()
        finally:
            for connection in held:
                connection.close()
        # the other peers' connections (here: over TCP) were never counted with them
        assert httpx.get(lab.url + "/healthz", timeout=10).status_code == 200


def test_sigterm_ends_open_streams_and_the_gateway_exits(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    profile = tmp_path / "site.toml"
    profile.write_text(
        f'workspace_root = "{root}"\n'
        '[image_build]\npartition = "cpu"\ncpus_per_task = 1\nmemory = "1G"\n'
        'time_limit = "0:10:00"\narch = "x86_64"\n[submitter]\nkind = "fake"\n'
        "[gateway]\nshutdown_timeout_s = 5\n"
    )
    sock = tmp_path / "gw.sock"
    command = [sys.executable, "-m", "slurm_image.composition"]
    gateway = subprocess.Popen(
        [*command, "--profile", str(profile), "serve", "--listen", f"unix:{sock}"],
        env={**os.environ, "PYTHONPATH": str(Path(".pkg").resolve())},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert eventually(sock.exists), "the gateway listens"
        client = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30)
        body = {"operation": "import_oci", "source": SOURCE, "name": "a", "role": "client"}
        started = client.post("http://gateway/v1/lifecycles", json=body)
        assert started.status_code == 200, started.text
        lifecycle_id = started.json()["lifecycle_id"]
        events: list[str] = []

        def follow() -> None:
            path = f"http://gateway/v1/lifecycles/{lifecycle_id}/logs?follow=true"
            with client.stream("GET", path, timeout=120) as answer:
                events.extend(line for line in answer.iter_lines() if line.startswith("event:"))

        reader = threading.Thread(target=follow)
        reader.start()
        time.sleep(1)
        gateway.send_signal(signal.SIGTERM)
        assert gateway.wait(timeout=60) == 0
        reader.join(timeout=30)
        assert events == ["event: error"], "the stream is told the gateway stops"
    finally:
        if gateway.poll() is None:
            gateway.kill()
            gateway.wait()
