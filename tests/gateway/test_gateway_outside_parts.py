"""A registry or a scheduler that stops answering (docs/gateway.md, "Limits"): the requests that
need it hold at most ``[gateway] max_registry_calls`` or ``max_scheduler_calls`` threads (one
registry at most ``max_calls_per_registry``, the others answered meanwhile), one more is
refused at once (429, Retry-After, naming the setting), and the reads of the store, the
pages and /healthz are answered meanwhile; when the part answers again, every call ends and
every thread is given back.

The lab's thread pool holds anyio's 40 threads: ``HUNG`` calls, more than that, would hold every
one of them if they ran in it."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from gateway_lab import SOURCE, GatewayLab, eventually, gateway_lab
from slurm_image.wire.exit_codes import EXIT_BUSY

HUNG = 48
READS = ("/healthz", "/v1/aliases", "/v1/aliases/app", "/v1/history", "/", "/aliases/app")


class SilentRegistry:
    """A registry that takes connections and never answers, until ``come_back``: then every
    connection, held or new, is answered with a plain-HTTP 404 and closed (a client that
    speaks TLS finds no TLS there)."""

    ANSWER = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.answering = False
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def holding(self) -> int:
        with self.lock:
            return len(self.held)

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            with self.lock:
                if not self.answering:
                    self.held.append(connection)
                    continue
            self._answer(connection)

    def _answer(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            connection.settimeout(1)
            connection.recv(65536)
            connection.sendall(self.ANSWER)
            connection.shutdown(socket.SHUT_WR)
        connection.close()

    def come_back(self) -> None:
        with self.lock:
            self.answering = True
            held, self.held = self.held, []
        for connection in held:
            self._answer(connection)

    def close(self) -> None:
        self.come_back()
        self.server.close()


@pytest.fixture
def registry() -> Iterator[SilentRegistry]:
    silent = SilentRegistry()
    try:
        yield silent
    finally:
        silent.close()


def ask(lab: GatewayLab, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method,
        lab.url + path,
        json=body,
        headers={"Authorization": f"Munge {lab.credential('alice')}"},
        timeout=300,
    )


def gauge(lab: GatewayLab, name: str) -> float:
    answer = httpx.get(
        lab.url + "/metrics",
        headers={"Authorization": f"Munge {lab.credential('service')}"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    found = re.search(rf"^slurm_image_{name}\{{[^}}]*\}} (\S+)$", answer.text, re.MULTILINE)
    assert found is not None, answer.text
    return float(found.group(1))


def published(lab: GatewayLab) -> None:
    """``app``, imported and published, for the reads to read."""
    outcome = lab.local("alice").import_image(SOURCE, name="app", role="client")
    lab.run_job(outcome.lifecycle_id)
    assert lab.local().settle().published == [outcome.lifecycle_id]


def assert_reads_answered(lab: GatewayLab) -> None:
    for path in READS:
        answer = ask(lab, "GET", path)
        assert answer.status_code == 200, (path, answer.text)


def assert_refused(answer: httpx.Response, setting: str) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.json()["error"]["field"] == setting
    assert answer.json()["error"]["exit_code"] == EXIT_BUSY
    assert int(answer.headers["retry-after"]) >= 1


def assert_released(lab: GatewayLab, part: str) -> None:
    assert eventually(lambda: gauge(lab, f"gateway_{part}_calls") == 0, within_s=60)
    assert eventually(lambda: gauge(lab, "gateway_busy_threads") == 0, within_s=60)


def test_a_registry_that_stops_answering_holds_only_its_own_calls(
    registry: SilentRegistry,
) -> None:
    with gateway_lab(f"max_registry_calls = {HUNG}\nmax_calls_per_registry = {HUNG}") as lab:
        published(lab)
        tag = {"reference": f"{registry.address}/team/app:1", "timeout_s": 600}
        with ThreadPoolExecutor(HUNG) as pool:
            hung: list[Future[httpx.Response]] = [
                pool.submit(ask, lab, "POST", "/v1/resolve", tag) for _ in range(HUNG)
            ]
            try:
                assert eventually(lambda: registry.holding == HUNG, within_s=60), registry.holding
                assert_refused(ask(lab, "POST", "/v1/resolve", tag), "max_registry_calls")
                assert_refused(ask(lab, "GET", "/v1/outdated?names=app"), "max_registry_calls")
                assert_reads_answered(lab)
                assert gauge(lab, "gateway_registry_calls") == HUNG
            finally:
                registry.come_back()
            answers = [future.result(timeout=300) for future in hung]
        for answer in answers:
            assert answer.status_code == 502, answer.text
            assert answer.json()["error"]["field"] == registry.address
        assert_released(lab, "registry")
        assert ask(lab, "POST", "/v1/resolve", tag).status_code == 502, "a call is taken again"


def test_a_registry_that_stops_answering_holds_only_its_share_of_the_registries_calls(
    registry: SilentRegistry,
) -> None:
    share = 4
    with gateway_lab(f"max_calls_per_registry = {share}") as lab:
        tag = {"reference": f"{registry.address}/team/app:1", "timeout_s": 600}
        other = SilentRegistry()
        other.come_back()  # answers at once: 404, and plain HTTP
        with ThreadPoolExecutor(share) as pool:
            hung = [pool.submit(ask, lab, "POST", "/v1/resolve", tag) for _ in range(share)]
            try:
                assert eventually(lambda: registry.holding == share, within_s=60)
                assert_refused(ask(lab, "POST", "/v1/resolve", tag), "max_calls_per_registry")
                elsewhere = {"reference": f"{other.address}/team/app:1", "timeout_s": 60}
                answer = ask(lab, "POST", "/v1/resolve", elsewhere)
                assert answer.status_code == 502, answer.text
                assert answer.json()["error"]["field"] == other.address
                assert gauge(lab, "gateway_registry_calls") == share
            finally:
                registry.come_back()
                other.close()
            answers = [future.result(timeout=300) for future in hung]
        assert [answer.status_code for answer in answers] == [502] * share
        assert_released(lab, "registry")


def test_a_scheduler_that_stops_answering_holds_only_its_own_calls() -> None:
    with gateway_lab(f"max_scheduler_calls = {HUNG}") as lab:
        published(lab)
        running = lab.local("alice").import_image(SOURCE, name="next", role="client", force=True)
        ids = running.lifecycle_id
        lab.scheduler.hang()
        with ThreadPoolExecutor(HUNG) as pool:
            hung = [pool.submit(ask, lab, "GET", f"/v1/lifecycles?ids={ids}") for _ in range(HUNG)]
            try:
                assert eventually(lambda: lab.scheduler.waiting == HUNG, within_s=60), (
                    lab.scheduler.waiting
                )
                assert_refused(ask(lab, "GET", f"/v1/lifecycles?ids={ids}"), "max_scheduler_calls")
                wait = {"lifecycle_ids": [ids], "timeout_s": 1}
                assert_refused(ask(lab, "POST", "/v1/lifecycles/wait", wait), "max_scheduler_calls")
                assert_refused(
                    ask(lab, "POST", f"/v1/lifecycles/{ids}/cancel"), "max_scheduler_calls"
                )
                assert ask(lab, "GET", "/requests").status_code == 429
                assert_reads_answered(lab)
                assert gauge(lab, "gateway_scheduler_calls") == HUNG
            finally:
                lab.scheduler.answer()
            answers = [future.result(timeout=300) for future in hung]
        for answer in answers:
            assert answer.status_code == 200, answer.text
            assert answer.json()["lifecycles"][0]["lifecycle_id"] == ids
        assert_released(lab, "scheduler")
        assert ask(lab, "POST", f"/v1/lifecycles/{ids}/cancel").status_code == 200
