"""MUNGE credentials over real HTTP (tests/gateway_lab.py): the gateway says the uid it decodes
as, the command line restricts every credential to it, and a credential restricted to anyone
else is refused."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from gateway_lab import GatewayLab, gateway_lab
from slurm_image.adapters.gateway_client.exchange import Gateway
from slurm_image.adapters.gateway_client.remote import RemoteLifecycles
from slurm_image.adapters.memory.munge import MemoryMunge
from slurm_image.adapters.munge import RESTRICTED
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.ports.authentication import CredentialRefused
from slurm_image.wire.exit_codes import EXIT_NOT_AUTHENTICATED


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    with gateway_lab() as running:
        yield running


def test_the_gateway_says_the_uid_it_decodes_as_to_anyone(lab: GatewayLab) -> None:
    answer = httpx.get(f"{lab.url}/v1/about", timeout=10)
    assert answer.status_code == 200
    assert answer.json() == {"uid": os.geteuid()}


def test_the_command_line_restricts_each_credential_to_the_gateways_uid(lab: GatewayLab) -> None:
    made: list[str] = []
    alice = lab.munge.source(lab.uid("alice"), lab.uid("alice"))

    class Recording:
        def credential(self, restrict_uid: int | None = None) -> str:
            made.append(alice.credential(restrict_uid=restrict_uid))
            return made[-1]

    client = RemoteLifecycles(Gateway(lab.url), credential_source=Recording())
    assert client.catalog_summaries() == []
    assert client.queue() == []
    assert len(made) == 2
    elsewhere = MemoryMunge(clock=SystemClock(), key=lab.munge.key, decoder=(4242, 4242))
    for credential in made:
        with pytest.raises(CredentialRefused) as refused:
            elsewhere.authenticate(credential)
        assert refused.value.rule == RESTRICTED


def test_a_credential_restricted_to_another_uid_is_refused(lab: GatewayLab) -> None:
    uid = lab.uid("alice")
    credential = lab.munge.encode(uid, uid, restrict_uid=os.geteuid() + 4242)
    answer = httpx.get(
        f"{lab.url}/v1/aliases", headers={"Authorization": f"Munge {credential}"}, timeout=10
    )
    assert answer.status_code == 401
    assert answer.json()["error"] == {
        "field": "authorization",
        "rule": RESTRICTED,
        "exit_code": EXIT_NOT_AUTHENTICATED,
    }


@pytest.mark.parametrize("tcp", [True, False])
def test_serve_keeps_its_replay_file_when_it_listens_over_tcp(tcp: bool) -> None:
    from slurm_image.cli.arguments import Options
    from slurm_image.composition.serve import build
    from slurm_image.gateway.serve import Listener

    with gateway_lab(http=False) as lab:
        replay_file = lab.directory / "accepted-credentials"
        listeners = [Listener("unix", path=str(lab.directory / "gw.sock"))]
        if tcp:
            listeners.append(Listener("https", host="127.0.0.1", port=8443))
        options = Options(
            profile=str(lab.profile), cluster=None, json=False, quiet=True, verbose=False
        )
        build(
            options,
            munge_socket=lab.munge.socket,
            listeners=listeners,
            replay_file=str(replay_file),
        )
        assert replay_file.exists() is tcp
        if tcp:
            assert replay_file.stat().st_mode & 0o777 == 0o600
