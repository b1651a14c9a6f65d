"""``slurm-image serve --workers N`` and several gateways on one store, as real processes of the
command line over a store the test's account owns (the in-memory scheduler): a bad worker count
is refused at once; N workers share the listening socket, a dead one is replaced and SIGTERM
stops them all; and two gateways on one store answer each other's changes at the next request,
one killed in the middle of imports leaving the other answering and the store recoverable."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli_site import run_main
from publish_support import SOURCE, SQSH_BYTES, chain_json, inspection
from slurm_image.adapters.gateway_client.exchange import Gateway
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.composition.api import Lifecycles
from slurm_image.domain.request import make_request
from slurm_image.domain.store_layout import StoreLayout
from slurm_image.gateway.workers import STEADY_AFTER_S
from support import PACKAGE_DIR

PROFILE = """workspace_root = "{root}"
[image_build]
partition = "cpu"
cpus_per_task = 1
memory = "1G"
time_limit = "0:10:00"
arch = "x86_64"
[submitter]
kind = "fake"
[gateway]
requests_per_minute = 1000000
"""
ENV = {"PYTHONPATH": PACKAGE_DIR, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}


@pytest.mark.parametrize("value", ["0", "-1", "65", "two", "1.5", ""])
def test_a_bad_worker_count_exits_2_naming_the_option_and_binds_nothing(
    capsys: Any, tmp_path: Path, value: str
) -> None:
    sock = tmp_path / "gateway.sock"
    code, _, err = run_main(capsys, "serve", "--listen", f"unix:{sock}", "--workers", value)
    assert code == 2
    assert "--workers" in err and "must be a whole number from 1 to 64" in err
    assert not sock.exists()


@pytest.fixture
def site(world_readable_tmp: Path) -> Path:
    """A store with the alias ``one`` of ``SOURCE`` published; its profile's path."""
    root = world_readable_tmp / "ws"
    root.mkdir(mode=0o755)
    profile = world_readable_tmp / "site.toml"
    profile.write_text(PROFILE.format(root=root))
    lifecycles = Lifecycles.from_profile(str(profile), environ={})
    lifecycles.open_store()
    request = make_request("import_oci", name="one", role="client", source=SOURCE)
    prepared = lifecycles.stage(request)
    submission = lifecycles.container.submit()(prepared)
    paths = prepared.plan.paths
    Path(paths.sqsh).write_bytes(SQSH_BYTES)
    Path(paths.result).write_bytes(inspection("client", SQSH_BYTES))
    assert prepared.plan.source_digest is not None
    Path(paths.job_dir, "chain.json").write_bytes(chain_json(prepared.plan.source_digest))
    Path(paths.job_dir, "architecture").write_bytes(b"x86_64\n")
    lifecycles.container.submitter().finish(submission.job_id, 0)
    lifecycles.publish(prepared.lifecycle_id)
    return profile


@contextmanager
def served(profile: Path, sock: Path, *options: str) -> Iterator[subprocess.Popen[bytes]]:
    """``slurm-image serve`` on ``sock`` until the block ends, then SIGTERM."""
    command = [sys.executable, "-m", "slurm_image.composition", "--profile", str(profile)]
    log = sock.with_suffix(".log")
    with log.open("wb") as output:
        server = subprocess.Popen(
            [*command, "serve", "--listen", f"unix:{sock}", *options],
            env=ENV,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        _await(lambda: _healthy(sock), f"serve did not answer: {log.read_text()}")
        yield server
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)


def _healthy(sock: Path) -> bool:
    try:
        return _get(sock, "/healthz").status_code == 200
    except httpx.TransportError:
        return False


def _get(sock: Path, path: str) -> httpx.Response:
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), timeout=30) as client:
        return client.get(f"http://gateway{path}")


def _await(ready: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        found += [
            int(child) for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        ]
    return found


def _shows(sock: Path, names: list[str]) -> list[int]:
    """The status of a ``show`` of each name, asked at once, one connection each."""
    answers: list[int] = []
    threads = [
        threading.Thread(
            target=lambda n=name: answers.append(_get(sock, f"/v1/aliases/{n}").status_code)
        )
        for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_workers_share_the_socket_a_dead_one_is_replaced_and_sigterm_stops_them_all(
    site: Path,
) -> None:
    sock = site.parent / "gateway.sock"
    with served(site, sock, "--workers", "2") as server:
        children = _children(server.pid)
        assert len(children) == 3  # two workers and the settler
        assert _shows(sock, ["one"] * 40) == [200] * 40
        time.sleep(STEADY_AFTER_S)  # past it, a child that dies is replaced
        os.kill(children[0], signal.SIGKILL)
        _await(
            lambda: children[0] not in _children(server.pid) and len(_children(server.pid)) == 3,
            "no child replaced the one killed",
        )
        assert _shows(sock, ["one"] * 40) == [200] * 40
        last = _children(server.pid)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0
    for pid in last:
        assert (
            not Path(f"/proc/{pid}").exists()
            or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        )
    assert not sock.exists()


def _open_connections_seen(connection: socket.socket) -> int:
    """``gateway_open_connections`` of the worker holding ``connection``, asked over it."""
    connection.sendall(b"GET /metrics HTTP/1.1\r\nhost: gateway\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += connection.recv(65536)
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: *(\d+)", head.lower()).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += connection.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), answer[:300]
    found = re.search(rb"^slurm_image_gateway_open_connections{[^}]*} (\d+)", body, re.MULTILINE)
    assert found is not None, body[-2000:]
    return int(found.group(1))


def test_the_workers_hold_even_shares_of_connections_that_arrive_at_once(site: Path) -> None:
    sock = site.parent / "gateway.sock"
    many = 40
    with served(site, sock, "--workers", "2"):
        connections = []
        try:
            for _ in range(many):  # all queued before any is taken
                connections.append(socket.socket(socket.AF_UNIX))
                connections[-1].settimeout(30)
                connections[-1].connect(str(sock))
            for connection in connections:  # each taken by a worker by the time it answers
                _open_connections_seen(connection)
            seen = [_open_connections_seen(connection) for connection in connections]
        finally:
            for connection in connections:
                connection.close()
    assert all(abs(share - many // 2) <= 6 for share in seen), f"uneven shares of {many}: {seen}"


def test_a_worker_that_fails_as_it_starts_stops_the_gateway_with_its_exit_code(
    site: Path,
) -> None:
    sock = site.parent / "gateway.sock"
    replay = site.parent / "replay"
    replay.write_text("")
    replay.chmod(0o644)  # others may read it: a worker refuses it
    command = [sys.executable, "-m", "slurm_image.composition", "--profile", str(site), "serve"]
    done = subprocess.run(
        [
            *command,
            "--listen",
            f"unix:{sock}",
            "--listen",
            "http://127.0.0.1:0",
            "--replay-file",
            str(replay),
            "--workers",
            "2",
        ],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "replay_file" in done.stderr
    assert not sock.exists()


def _remote(sock: Path) -> RemoteLifecycles:
    return RemoteLifecycles(Gateway(f"unix:{sock}"))


def _import(sock: Path, name: str) -> None:
    outcome = _remote(sock).import_image(SOURCE, name=name, role="client", arch="x86_64")
    assert outcome.from_store, outcome


def _listed(sock: Path) -> list[str]:
    answer = _get(sock, "/v1/aliases?limit=1000")
    assert answer.status_code == 200, answer.text
    return sorted(image["name"] for image in answer.json()["images"])


def test_two_gateways_on_one_store_answer_each_others_changes_at_the_next_request(
    site: Path,
) -> None:
    first, second = site.parent / "first.sock", site.parent / "second.sock"
    with served(site, first), served(site, second):
        assert _listed(second) == ["one"]
        assert _get(second, "/v1/aliases/two").status_code == 404
        _import(first, "two")
        assert _get(second, "/v1/aliases/two").json()["record"]["name"] == "two"
        assert _listed(second) == ["one", "two"]
        _remote(first).unregister("two")
        assert _get(second, "/v1/aliases/two").status_code == 404
        assert _listed(second) == ["one"]


def test_a_gateway_killed_in_the_middle_of_imports_leaves_the_other_answering(
    site: Path,
) -> None:
    first, second = site.parent / "first.sock", site.parent / "second.sock"
    layout = StoreLayout(str(site.parent / "ws"))
    published: list[str] = []
    with served(site, first) as doomed, served(site, second):
        assert _listed(second) == ["one"]

        def imports() -> None:
            for index in range(1000):
                try:
                    _import(first, f"burst{index:03d}")
                except Exception:  # the gateway is gone
                    return
                published.append(f"burst{index:03d}")

        importer = threading.Thread(target=imports)
        importer.start()
        _await(lambda: len(published) >= 5, "the first gateway published nothing")
        doomed.send_signal(signal.SIGKILL)
        importer.join(60)
        doomed.wait(30)

        assert _healthy(second)
        assert set(_shows(second, published)) == {200}
        listed = _listed(second)
        assert set(published) <= set(listed)
        assert set(_shows(second, listed)) == {200}
        _import(second, "after")
        assert _get(second, "/v1/aliases/after").status_code == 200
        assert "after" in _listed(second)

        gc = subprocess.run(
            [sys.executable, "-m", "slurm_image.composition", "--profile", str(site), "gc"],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert gc.returncode == 0, gc.stderr
        assert not os.listdir(layout.markers)
        begun, done = Path(layout.aliases_begun), Path(layout.aliases_done)
        assert begun.stat().st_size == done.stat().st_size
        listed = _listed(second)
        assert set(_shows(second, listed)) == {200}
        assert set(published) | {"one", "after"} <= set(listed)
