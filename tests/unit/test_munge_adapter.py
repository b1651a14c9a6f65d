"""The MUNGE adapters' own rules, with stand-ins for ``unmunge`` and ``munge`` that answer what
the test says: an answer is untrusted text, the exit status and ``STATUS`` must both say
success, the credential travels on stdin only, the environment is minimal, and the memory of
accepted credentials lasts until their time to live ends (adapters/munge.py). The contract suite
runs the adapters against real daemons."""

from __future__ import annotations

import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm_image.adapters.memory import FakeClock
from slurm_image.adapters.munge import (
    CANNOT_CONNECT,
    EXPIRED,
    PAYLOAD,
    REPLAYED,
    AcceptedCredentials,
    MungeAuthenticator,
    MungeCredentialSource,
)
from slurm_image.ports.authentication import (
    Authenticated,
    AuthenticatorUnavailable,
    CredentialRefused,
)

CREDENTIAL = "MUNGE:AwQFAAC6Cxv3so4+4aTW91XkHOua2cUYNBPHCddwh56YpDm/ml4UK9hlwQLQ2zsk=:"
SOCKET = "/run/test/munge.socket"
ENCODED_AT = 1_796_425_700
GOOD = (
    "STATUS:          0\nENCODE_TIME:     {encoded}\nDECODE_TIME:     {decoded}\n"
    "TTL:             300\nUID:             1500\nGID:             1501\nLENGTH:          0\n"
)


def answer(**fields: object) -> str:
    values = {"encoded": ENCODED_AT, "decoded": ENCODED_AT + 1, **fields}
    return GOOD.format(**values)


def stand_in(tmp_path: Path, text: str, status: int = 0, name: str = "unmunge") -> str:
    """A program that records its argv, stdin and environment, prints ``text``, exits
    ``status``."""
    program = tmp_path / name
    (tmp_path / "calls").touch()
    program.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls\n'
        f"cat > {tmp_path}/stdin\n"
        f"env > {tmp_path}/env\n"
        f"printf %s {shlex.quote(text)}\n"
        f"exit {status}\n"
    )
    program.chmod(0o755)
    return str(program)


def calls(tmp_path: Path) -> list[str]:
    return (tmp_path / "calls").read_text().splitlines()


def authenticator(
    tmp_path: Path, text: str, status: int = 0, clock: FakeClock | None = None
) -> MungeAuthenticator:
    return MungeAuthenticator(socket=SOCKET, unmunge=stand_in(tmp_path, text, status), clock=clock)


def test_the_answer_names_the_maker(tmp_path: Path) -> None:
    assert authenticator(tmp_path, answer()).authenticate(CREDENTIAL) == Authenticated(1500, 1501)


def test_the_credential_travels_on_stdin_never_in_the_arguments(tmp_path: Path) -> None:
    authenticator(tmp_path, answer()).authenticate(CREDENTIAL)
    assert (tmp_path / "stdin").read_text() == CREDENTIAL
    (argv,) = calls(tmp_path)
    assert CREDENTIAL not in argv
    assert argv.split() == [
        "--socket",
        SOCKET,
        "--numeric",
        "--keys",
        "STATUS,UID,GID,LENGTH,TTL,ENCODE_TIME,DECODE_TIME",
        "--output",
        "/dev/null",
    ]


def test_the_environment_is_minimal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUNGE_SECRET_OF_THE_CALLER", "x")
    authenticator(tmp_path, answer()).authenticate(CREDENTIAL)
    names = {line.split("=", 1)[0] for line in (tmp_path / "env").read_text().splitlines()}
    assert names - {"PWD", "SHLVL", "_"} == {"PATH", "LC_ALL"}


@pytest.mark.parametrize(
    ("status", "rule"),
    [(15, EXPIRED), (17, REPLAYED), (99, "munged refused the MUNGE credential (status 99)")],
)
def test_a_failing_exit_status_refuses_whatever_the_text_says(
    tmp_path: Path, status: int, rule: str
) -> None:
    with pytest.raises(CredentialRefused) as caught:
        authenticator(tmp_path, answer(), status).authenticate(CREDENTIAL)
    assert caught.value.rule == rule


@pytest.mark.parametrize("status", [1, 5, 6, 7])
def test_a_daemon_that_cannot_answer_is_unavailable(tmp_path: Path, status: int) -> None:
    with pytest.raises(AuthenticatorUnavailable) as caught:
        authenticator(tmp_path, "", status).authenticate(CREDENTIAL)
    assert caught.value.field == SOCKET
    if status == 6:
        assert caught.value.rule == CANNOT_CONNECT


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (answer().replace("STATUS:          0", "STATUS:          17"), "says status 17"),
        (answer().replace("UID:             1500", "UID:             root (0)"), "UID is not"),
        (answer().replace("UID:             1500", "UID:             -1"), "UID is not"),
        (answer() + "UID:             0\n", "UID twice"),
        (answer().replace("GID:             1501\n", ""), "no GID"),
        (answer() + "PAYLOAD: x\n", "none of its metadata keys"),
        (answer() + "just text\n", "none of its metadata keys"),
        (answer().replace("UID:             1500", "UID:             4294967295"), "no uid"),
        ("", "no STATUS"),
    ],
)
def test_an_answer_that_cannot_be_read_accepts_no_one(tmp_path: Path, text: str, why: str) -> None:
    with pytest.raises(AuthenticatorUnavailable) as caught:
        authenticator(tmp_path, text).authenticate(CREDENTIAL)
    assert caught.value.field == SOCKET
    assert caught.value.rule.startswith("unmunge's answer cannot be read: ")
    assert why in caught.value.rule


def test_a_payload_is_refused(tmp_path: Path) -> None:
    text = answer().replace("LENGTH:          0", "LENGTH:          5")
    with pytest.raises(CredentialRefused) as caught:
        authenticator(tmp_path, text).authenticate(CREDENTIAL)
    assert caught.value.rule == PAYLOAD


def test_a_missing_program_is_unavailable_and_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-unmunge")
    with pytest.raises(AuthenticatorUnavailable) as caught:
        MungeAuthenticator(socket=SOCKET, unmunge=missing).authenticate(CREDENTIAL)
    assert caught.value.field == SOCKET
    assert missing in caught.value.rule


def test_a_program_that_does_not_answer_is_stopped(tmp_path: Path) -> None:
    program = tmp_path / "unmunge"
    program.write_text("#!/bin/sh\nexec sleep 60\n")
    program.chmod(0o755)
    slow = MungeAuthenticator(socket=SOCKET, unmunge=str(program), timeout_s=0.2)
    with pytest.raises(AuthenticatorUnavailable) as caught:
        slow.authenticate(CREDENTIAL)
    assert "did not answer within 0.2s" in caught.value.rule


def test_an_accepted_credential_is_remembered_until_its_time_to_live_ends(
    tmp_path: Path,
) -> None:
    """Remembered to the later of munged's encode and decode times plus the TTL: within it
    refused without asking munged again, after it asked again."""
    clock = FakeClock(datetime.fromtimestamp(ENCODED_AT + 1, UTC))
    accepting = authenticator(tmp_path, answer(), clock=clock)
    accepting.authenticate(CREDENTIAL)
    clock.set(datetime.fromtimestamp(ENCODED_AT + 1 + 300, UTC))
    with pytest.raises(CredentialRefused) as caught:
        accepting.authenticate(CREDENTIAL)
    assert caught.value.rule == REPLAYED
    assert len(calls(tmp_path)) == 1
    clock.advance(timedelta(seconds=1))
    assert accepting.authenticate(CREDENTIAL) == Authenticated(1500, 1501)
    assert len(calls(tmp_path)) == 2


def test_the_memory_forgets_what_has_ended() -> None:
    clock = FakeClock(datetime.fromtimestamp(1000, UTC))
    memory = AcceptedCredentials(clock)
    memory.remember(b"a" * 32, 1010.0)
    memory.remember(b"b" * 32, 1100.0)
    assert memory.seen(b"a" * 32) and len(memory) == 2
    clock.advance(timedelta(seconds=11))
    assert not memory.seen(b"a" * 32) and memory.seen(b"b" * 32)
    assert len(memory) == 1
    clock.advance(timedelta(seconds=90))
    assert len(memory) == 0


def test_the_memory_keeps_the_later_end_of_one_credential() -> None:
    clock = FakeClock(datetime.fromtimestamp(1000, UTC))
    memory = AcceptedCredentials(clock)
    memory.remember(b"a" * 32, 1100.0)
    memory.remember(b"a" * 32, 1010.0)
    clock.advance(timedelta(seconds=50))
    assert memory.seen(b"a" * 32)


def test_a_source_passes_its_ttl_and_socket(tmp_path: Path) -> None:
    program = stand_in(tmp_path, CREDENTIAL + "\n", name="munge")
    source = MungeCredentialSource(socket=SOCKET, munge=program, ttl_s=60)
    assert source.credential() == CREDENTIAL
    assert calls(tmp_path) == [f"--no-input --socket {SOCKET} --ttl 60"]
    assert (tmp_path / "stdin").read_text() == ""


@pytest.mark.parametrize(
    ("text", "status", "rule"),
    [
        ("", 6, f"munge could not make a credential: {CANNOT_CONNECT}"),
        ("", 3, "munge could not make a credential: status 3"),
        ("not a credential\n", 0, "munge printed no MUNGE credential"),
    ],
)
def test_a_source_that_makes_no_credential_is_unavailable(
    tmp_path: Path, text: str, status: int, rule: str
) -> None:
    program = stand_in(tmp_path, text, status, name="munge")
    with pytest.raises(AuthenticatorUnavailable) as caught:
        MungeCredentialSource(socket=SOCKET, munge=program).credential()
    assert (caught.value.field, caught.value.rule) == (SOCKET, rule)


def test_a_source_refuses_a_ttl_below_one_second() -> None:
    with pytest.raises(ValueError, match="at least 1 second"):
        MungeCredentialSource(ttl_s=0)
