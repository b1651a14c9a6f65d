"""The Authenticator and CredentialSource ports, against every adapter: a credential says which
uid and gid made it, and is accepted once; an expired, replayed, forged, malformed or payload-
carrying one is refused (401), and a daemon that cannot be asked is unavailable (503), named.

The MUNGE adapters run against munged daemons of the test's own (tests/munge_daemon.py): one
with the key the authenticator trusts, one with another key for forgeries; credentials of an
ordinary uid are made in a forked child that setuid()s to it, so the uid decoded is the
maker's and not only this process's."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from munge_daemon import MungeDaemon, running_daemons
from parallel import ordinary_uid
from slurm_image.adapters.accepted_credentials_file import AcceptedCredentialsFile
from slurm_image.adapters.memory import FakeClock, MemoryMunge
from slurm_image.adapters.munge import (
    CANNOT_CONNECT,
    EXPIRED,
    INVALID,
    NOT_A_CREDENTIAL,
    PAYLOAD,
    REPLAYED,
    RESTRICTED,
    MungeAuthenticator,
    MungeCredentialSource,
)
from slurm_image.adapters.system_clock import SystemClock
from slurm_image.ports.authentication import (
    FIELD,
    Authenticated,
    Authenticator,
    AuthenticatorUnavailable,
    CredentialRefused,
    CredentialSource,
)
from support import unavailable

ORDINARY = (ordinary_uid(23000), ordinary_uid(23000) + 500)
"""A uid and a gid of no account, each the worker's own, for a child to make credentials as."""


@dataclass
class Harness:
    authenticator: Authenticator
    socket: str
    own: tuple[int, int]
    """This process's uid and gid, as the daemon sees them."""
    source: Callable[[], CredentialSource]
    """This process's credential source."""
    made_as: Callable[[int, int], str]
    """A credential made by a process running as the uid and gid."""
    short_lived: Callable[[], str]
    """A credential of this process living 1 second."""
    let_expire: Callable[[], None]
    """Time passes until ``short_lived`` ones have expired."""
    with_payload: Callable[[], str]
    restricted: Callable[[int | None, int | None], str]
    """A credential of this process decodable only by the uid and gid given (None: any)."""
    forged: Callable[[], str]
    """A credential made with another key."""
    another_process: Callable[[], Authenticator]
    """The Authenticator of another process asking the same daemon."""
    restarted: Callable[[], Authenticator]
    """The Authenticator of the process after ``authenticator``'s (the gateway started again),
    reading the replay file it kept."""
    restart: Callable[[], None]
    stop: Callable[[], None]
    kill: Callable[[], None]
    """The daemon dies at once (SIGKILL), leaving its socket behind."""


def _made_as(socket: str, uid: int, gid: int) -> str:
    """A credential made by a forked child that dropped to ``uid`` and ``gid``."""
    if (uid, gid) == (os.getuid(), os.getgid()):
        return MungeCredentialSource(socket=socket).credential()
    if os.geteuid() != 0:
        unavailable("a credential of another uid is made by a child of root that setuid()s")
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.write(write_end, MungeCredentialSource(socket=socket).credential().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        made = answer.read().decode()
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0, "the child made none"
    return made


@pytest.fixture
def munge_harness(tmp_path: Path) -> Iterator[Harness]:
    replay_file = str(tmp_path / "accepted-credentials")
    with running_daemons() as daemons:
        current: list[MungeDaemon] = [daemons.good]
        socket = daemons.good.socket

        def with_payload() -> str:
            done = subprocess.run(
                ["munge", "--string=a payload", f"--socket={socket}"],
                capture_output=True,
                text=True,
                check=True,
            )
            return done.stdout.strip()

        def restricted(uid: int | None, gid: int | None) -> str:
            argv = ["munge", "--no-input", f"--socket={socket}"]
            argv += [f"--restrict-uid={uid}"] if uid is not None else []
            argv += [f"--restrict-gid={gid}"] if gid is not None else []
            return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()

        def restart() -> None:
            current[0] = current[0].restart()

        def kill() -> None:
            current[0].process.kill()
            current[0].process.wait()

        try:
            yield Harness(
                authenticator=MungeAuthenticator(
                    socket=socket, accepted=AcceptedCredentialsFile(replay_file, SystemClock())
                ),
                socket=socket,
                own=(os.getuid(), os.getgid()),
                source=lambda: MungeCredentialSource(socket=socket),
                made_as=lambda uid, gid: _made_as(socket, uid, gid),
                short_lived=lambda: MungeCredentialSource(socket=socket, ttl_s=1).credential(),
                # munged counts whole seconds: 1 s of life has ended 2 s after it was made
                let_expire=lambda: time.sleep(2.1),
                with_payload=with_payload,
                restricted=restricted,
                forged=lambda: MungeCredentialSource(socket=daemons.other.socket).credential(),
                another_process=lambda: MungeAuthenticator(socket=socket),
                restarted=lambda: MungeAuthenticator(
                    socket=socket, accepted=AcceptedCredentialsFile(replay_file, SystemClock())
                ),
                restart=restart,
                stop=lambda: current[0].stop(),
                kill=kill,
            )
        finally:
            current[0].stop()


@pytest.fixture
def memory_harness(tmp_path: Path) -> Harness:
    replay_file = str(tmp_path / "accepted-credentials")
    clock = FakeClock()
    own = (1000, 1000)
    daemon = MemoryMunge(
        clock, key=b"the site's key", socket="/run/munge/munge.socket.2", decoder=own
    )
    other = MemoryMunge(clock, key=b"another key")

    def restart() -> None:
        daemon.stop()
        daemon.start()

    return Harness(
        authenticator=daemon.authenticator(AcceptedCredentialsFile(replay_file, clock)),
        socket=daemon.socket,
        own=own,
        source=lambda: daemon.source(*own),
        made_as=lambda uid, gid: daemon.encode(uid, gid),
        short_lived=lambda: daemon.encode(*own, ttl_s=1),
        let_expire=lambda: clock.advance(timedelta(seconds=2.1)),
        with_payload=lambda: daemon.encode(*own, payload=b"a payload"),
        restricted=lambda uid, gid: daemon.encode(*own, restrict_uid=uid, restrict_gid=gid),
        forged=lambda: other.encode(*own),
        another_process=daemon.authenticator,
        restarted=lambda: daemon.authenticator(AcceptedCredentialsFile(replay_file, clock)),
        restart=restart,
        stop=daemon.stop,
        kill=daemon.stop,
    )


@pytest.fixture(params=["munge", "memory"])
def harness(request: pytest.FixtureRequest) -> Harness:
    built: Harness = request.getfixturevalue(f"{request.param}_harness")
    return built


def _refusal(harness: Harness, credential: str) -> CredentialRefused:
    with pytest.raises(CredentialRefused) as caught:
        harness.authenticator.authenticate(credential)
    assert caught.value.field == FIELD
    assert caught.value.value is None
    assert not credential or credential not in str(caught.value)
    return caught.value


def test_adapters_implement_the_ports(harness: Harness) -> None:
    assert isinstance(harness.authenticator, Authenticator)
    assert isinstance(harness.source(), CredentialSource)


def test_a_credential_says_who_made_it(harness: Harness) -> None:
    credential = harness.source().credential()
    assert harness.authenticator.authenticate(credential) == Authenticated(*harness.own)


def test_a_credential_made_as_an_ordinary_uid_names_that_uid(harness: Harness) -> None:
    uid, gid = ORDINARY
    credential = harness.made_as(uid, gid)
    assert harness.authenticator.authenticate(credential) == Authenticated(uid=uid, gid=gid)


def test_every_credential_is_new(harness: Harness) -> None:
    source = harness.source()
    assert source.credential() != source.credential()


def test_a_credential_is_accepted_once(harness: Harness) -> None:
    credential = harness.source().credential()
    harness.authenticator.authenticate(credential)
    assert _refusal(harness, credential).rule == REPLAYED


def test_a_credential_replayed_to_another_process_on_the_daemon_is_refused(
    harness: Harness,
) -> None:
    credential = harness.source().credential()
    harness.authenticator.authenticate(credential)
    with pytest.raises(CredentialRefused) as caught:
        harness.another_process().authenticate(credential)
    assert caught.value.rule == REPLAYED


def test_a_credential_replayed_after_the_daemon_restarted_is_still_refused(
    harness: Harness,
) -> None:
    """munged forgets what it decoded when it restarts; the process that accepted a credential
    does not, until the credential's time to live ends."""
    credential = harness.source().credential()
    harness.authenticator.authenticate(credential)
    harness.restart()
    assert _refusal(harness, credential).rule == REPLAYED
    # The limit this leaves (adapters/munge.py, "Replays"): a process that never saw it, asking
    # the restarted daemon, accepts it.
    assert harness.another_process().authenticate(credential) == Authenticated(*harness.own)


def test_a_credential_replayed_to_a_restarted_gateway_after_the_daemon_restarted_is_refused(
    harness: Harness,
) -> None:
    """Neither memory of the first process is left, but its replay file is."""
    credential = harness.source().credential()
    harness.authenticator.authenticate(credential)
    harness.restart()
    with pytest.raises(CredentialRefused) as caught:
        harness.restarted().authenticate(credential)
    assert caught.value.rule == REPLAYED
    fresh = harness.source().credential()
    assert harness.restarted().authenticate(fresh) == Authenticated(*harness.own)


def test_an_expired_credential_is_refused(harness: Harness) -> None:
    credential = harness.short_lived()
    harness.let_expire()
    assert _refusal(harness, credential).rule == EXPIRED


def test_a_credential_made_with_another_key_is_refused(harness: Harness) -> None:
    assert _refusal(harness, harness.forged()).rule == INVALID


def test_a_credential_with_a_payload_is_refused(harness: Harness) -> None:
    assert _refusal(harness, harness.with_payload()).rule == PAYLOAD


def test_a_credential_restricted_to_the_decoders_uid_is_accepted(harness: Harness) -> None:
    uid, gid = harness.own
    assert harness.authenticator.authenticate(harness.restricted(uid, None)) == Authenticated(
        uid, gid
    )
    assert harness.authenticator.authenticate(harness.restricted(uid, gid)) == Authenticated(
        uid, gid
    )


@pytest.mark.parametrize("which", ["uid", "gid"])
def test_a_credential_restricted_to_another_uid_or_gid_is_refused(
    harness: Harness, which: str
) -> None:
    other = ORDINARY[0] if which == "uid" else ORDINARY[1]
    credential = (
        harness.restricted(other, None) if which == "uid" else harness.restricted(None, other)
    )
    assert _refusal(harness, credential).rule == RESTRICTED


def test_a_source_restricts_its_credential_to_the_uid_given(harness: Harness) -> None:
    uid, gid = harness.own
    mine = harness.source().credential(restrict_uid=uid)
    assert harness.authenticator.authenticate(mine) == Authenticated(uid, gid)
    elsewhere = harness.source().credential(restrict_uid=ORDINARY[0])
    assert _refusal(harness, elsewhere).rule == RESTRICTED


@pytest.mark.parametrize(
    "text",
    [
        "",
        "garbage",
        "Munge MUNGE:AAAA:",
        "MUNGE:AAAA",
        "MUNGE:AA AA:",
        "MUNGE:AAAA:\n",
        "MUNGE:" + "A" * 5000 + ":",
        "MUNGE:AAAA:\nMUNGE:AAAA:",
    ],
    ids=[
        "empty",
        "word",
        "scheme",
        "unclosed",
        "space",
        "newline",
        "too-long",
        "two",
    ],
)
def test_text_that_is_no_credential_is_refused_before_the_daemon_is_asked(
    harness: Harness, text: str
) -> None:
    harness.stop()  # were the daemon asked, the answer would be "unavailable"
    assert _refusal(harness, text).rule == NOT_A_CREDENTIAL


def test_an_armored_credential_the_daemon_cannot_decode_is_refused(harness: Harness) -> None:
    _refusal(harness, "MUNGE:AAAA:")


def test_an_altered_credential_is_refused(harness: Harness) -> None:
    credential = harness.source().credential()
    middle = len(credential) // 2
    flipped = "B" if credential[middle] != "B" else "C"
    _refusal(harness, credential[:middle] + flipped + credential[middle + 1 :])


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_daemon_that_is_down_is_unavailable_and_named(harness: Harness, how: str) -> None:
    credential = harness.source().credential()
    (harness.stop if how == "stopped" else harness.kill)()
    with pytest.raises(AuthenticatorUnavailable) as caught:
        harness.authenticator.authenticate(credential)
    assert caught.value.field == harness.socket
    assert caught.value.rule == CANNOT_CONNECT
    assert credential not in str(caught.value)


def test_a_source_whose_daemon_is_down_is_unavailable_and_named(harness: Harness) -> None:
    source = harness.source()
    harness.stop()
    with pytest.raises(AuthenticatorUnavailable) as caught:
        source.credential()
    assert caught.value.field == harness.socket
    assert CANNOT_CONNECT in caught.value.rule
