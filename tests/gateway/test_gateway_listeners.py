"""Where the gateway listens and what the kernel says about who connects: the listeners' rules,
peer credentials on a real unix socket (a forked child as another uid), the command line over
the gateway with the same output and exit codes."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import slurm_image.composition.command_api as command_api
from cli_site import run_main as cli_run
from gateway_lab import SOURCE, GatewayLab, gateway_lab
from slurm_image.adapters.gateway_client.exchange import Gateway
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.domain.errors import InvalidRequest
from slurm_image.gateway.peer import peer_credentials
from slurm_image.gateway.serve import parse_listener


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("unix:/run/slurm-image/gateway.sock", "unix"),
        ("https://login1.example.org:8443", "https"),
        ("http://127.0.0.1:8080", "http"),
        ("http://[::1]:8080", "http"),
    ],
)
def test_a_listener_is_a_socket_https_or_loopback_http(text: str, kind: str) -> None:
    assert parse_listener(text).kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "unix:relative.sock",
        "http://10.0.0.1:8080",
        "http://login1.example.org:8080",
        "https://login1.example.org",
        "ftp://x:1",
        "unix:/" + "x" * 200,
    ],
)
def test_anything_else_is_refused_naming_listen(text: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_listener(text)
    assert refused.value.field == "listen"


def test_peer_credentials_are_the_kernels_word() -> None:
    one, other = socket.socketpair(socket.AF_UNIX)
    with one, other:
        peer = peer_credentials(one)
    assert (peer.pid, peer.uid, peer.gid) == (os.getpid(), os.getuid(), os.getgid())


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab("requests_per_minute = 100000") as running:
        yield running


def as_uid(uid: int, call: Any) -> Any:
    """``call()`` in a forked child that became ``uid``; its JSON-able result."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            data = json.dumps(call()).encode()
        except BaseException as error:
            data = json.dumps({"error": repr(error)}).encode()
        os.write(write, data)
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(child, 0)
    return json.loads(b"".join(chunks))


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another uid needs root")
def test_on_the_unix_socket_the_requester_is_the_connecting_processes_uid(lab: GatewayLab) -> None:
    def import_as_alice() -> Any:
        client = RemoteLifecycles(Gateway(f"unix:{lab.socket}"))
        return client.import_image(SOURCE, name="a", role="client").lifecycle_id

    lifecycle_id = as_uid(lab.uid("alice"), import_as_alice)
    assert isinstance(lifecycle_id, str), lifecycle_id
    assert lab.plan(lifecycle_id).request.requester.user == "alice"
    forged = httpx.Client(transport=httpx.HTTPTransport(uds=lab.socket))
    answer = forged.get(
        "http://gateway/v1/queue", headers={"Authorization": f"Munge {lab.credential('bob')}"}
    )
    assert answer.status_code == 200
    orders = answer.json()["queue"][0]["orders"]
    assert orders[0]["requester"] == "alice"
    assert Path(lab.socket).stat().st_mode & 0o777 == 0o666


def test_the_command_line_over_the_gateway_prints_and_exits_as_locally(
    lab: GatewayLab, capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    clients = {"who": "alice"}
    monkeypatch.setattr(command_api, "remote", lambda url: lab.client(clients["who"]))
    code, out, _ = cli_run(
        capsys, "--gateway", lab.url, "--json", "import", SOURCE, "--name", "a", "--role", "client"
    )
    assert code == 0
    started = json.loads(out)
    assert started["state"] == "SUBMITTED" and started["job_id"]
    lab.run_job(started["lifecycle_id"])
    code, out, _ = cli_run(capsys, "--gateway", lab.url, "wait", started["lifecycle_id"])
    assert code == 0 and "COMPLETED" in out
    code, out, _ = cli_run(
        capsys, "--gateway", lab.url, "--json", "publish", started["lifecycle_id"]
    )
    assert code == 0 and json.loads(out)["name"] == "a"
    code, out, _ = cli_run(capsys, "--gateway", lab.url, "--json", "list")
    (image,) = json.loads(out)["images"]
    assert (image["name"], image["owner"], image["group"]) == ("a", "alice", None)
    clients["who"] = "bob"
    code, _, err = cli_run(capsys, "--gateway", lab.url, "unregister", "a")
    assert code == 11
    assert err.startswith("slurm-image: error: name: unregistering a is for alice")
    code, _, err = cli_run(capsys, "--gateway", lab.url, "show", "nope")
    assert code == 2 and "no alias nope" in err
    code, out, _ = cli_run(capsys, "--gateway", lab.url, "--json", "history", "a")
    events = json.loads(out)["events"]
    assert [(e["event"], e["user"]) for e in events] == [("published", "alice"), ("refused", "bob")]


def test_a_gateway_that_cannot_be_reached_is_exit_3(
    capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("slurm_image.adapters.gateway_client.remote.UNREACHABLE_GRACE_S", 0.5)
    code, _, err = cli_run(capsys, "--gateway", f"unix:{tmp_path}/none.sock", "list")
    assert code == 3
    assert "cannot be reached" in err


def test_https_and_the_unix_socket_at_once_and_a_tls_listener_needs_its_key(
    tmp_path: Path,
) -> None:
    import asyncio
    import socket as sockets
    import threading

    from slurm_image.gateway.serve import Listener, build_servers
    from tls_material import make_tls_material

    with sockets.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    https = Listener("https", host="127.0.0.1", port=port)
    unix = Listener("unix", path=str(tmp_path / "gw.sock"))
    with pytest.raises(InvalidRequest) as refused:
        build_servers(object(), [https])  # type: ignore[arg-type]
    assert refused.value.field == "tls_cert"
    tls = make_tls_material(tmp_path / "tls")
    with gateway_lab(http=False) as lab:
        servers = build_servers(
            lab.app, [unix, https], tls_cert=str(tls.server_cert), tls_key=str(tls.server_key)
        )
        assert [len(bound) for _, bound in servers] == [1, 1], "plain and TLS apart"

        async def both() -> None:
            await asyncio.gather(*(server.serve(sockets=bound) for server, bound in servers))

        thread = threading.Thread(target=lambda: asyncio.run(both()), daemon=True)
        thread.start()
        try:
            while not all(server.started for server, _ in servers):
                thread.join(0.05)
            over_tls = httpx.get(
                f"https://127.0.0.1:{port}/v1/aliases",
                headers={"Authorization": f"Munge {lab.credential('alice')}"},
                verify=__import__("ssl").create_default_context(cafile=str(tls.ca_file)),
            )
            assert over_tls.status_code == 200
            assert over_tls.json() == {"images": [], "next": None}
            with pytest.raises(httpx.HTTPError):
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            local = httpx.Client(transport=httpx.HTTPTransport(uds=str(tmp_path / "gw.sock")))
            assert local.get("http://gateway/v1/queue").json() == {"queue": []}
        finally:
            for server, _ in servers:
                server.should_exit = True
            thread.join(20)


@pytest.mark.parametrize(
    "url",
    ["http://login1.example.org:8080", "http://10.0.0.1:80", "https://host", "gateway.sock"],
)
def test_a_client_asks_only_where_a_gateway_may_listen(url: str) -> None:
    with pytest.raises(InvalidRequest) as refused:
        Gateway(url)
    assert refused.value.field == "gateway"


def test_a_clients_address_is_the_listeners() -> None:
    assert Gateway("http://[::1]:8080").base == "http://[::1]:8080"
    assert Gateway("https://login1.example.org:8443/").base == "https://login1.example.org:8443"
    assert Gateway("unix:/run/slurm-image//gateway.sock").socket == "/run/slurm-image/gateway.sock"


def test_the_profiles_gateway_url_follows_the_same_rule() -> None:
    from slurm_image.domain.errors import InvalidProfile
    from slurm_image.domain.profile import parse_profile

    profile = {
        "workspace_root": "/tmp/ws",
        "image_build": {
            "partition": "cpu",
            "cpus_per_task": 1,
            "memory": "1G",
            "time_limit": "0:10:00",
        },
    }
    assert parse_profile(profile | {"gateway": {"url": "unix:/run/gw.sock"}}).gateway
    with pytest.raises(InvalidProfile) as refused:
        parse_profile(profile | {"gateway": {"url": "http://login1.example.org:8080"}})
    assert refused.value.field == "gateway.url"
    assert "loopback" in refused.value.rule


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another uid needs root")
def test_a_connection_handed_on_acts_as_whoever_connected(lab: GatewayLab) -> None:
    """docs/gateway.md, "Who is asking": the kernel's word is the connecting process's, read
    for every request on the connection, whoever holds it afterwards."""
    parent_end, child_end = socket.socketpair()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: alice connects and hands the connection on
        try:
            parent_end.close()
            os.setgroups([])
            os.setgid(lab.uid("alice"))
            os.setuid(lab.uid("alice"))
            connection = socket.socket(socket.AF_UNIX)
            connection.connect(lab.socket)
            socket.send_fds(child_end, [b"x"], [connection.fileno()])
        finally:
            os._exit(0)
    child_end.close()
    _, (handed,), _, _ = socket.recv_fds(parent_end, 1, 1)
    os.waitpid(child, 0)
    connection = socket.socket(fileno=handed)
    body = json.dumps(
        {"operation": "import_oci", "source": SOURCE, "name": "handed", "role": "client"}
    ).encode()
    connection.sendall(
        b"POST /v1/lifecycles HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    answer = b""
    while piece := connection.recv(65536):
        answer += piece
    connection.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer
    lifecycle_id = json.loads(payload)["lifecycle_id"]
    assert lab.plan(lifecycle_id).request.requester.user == "alice", "not the holder (root)"
