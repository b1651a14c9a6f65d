"""A registry's text as an error quotes it (domain/registry_text.py): the credentials sent to
it dropped wherever they appear, control characters removed first (so none hidden inside an
echoed secret saves it), and the length bounded."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain.credentials import RegistryCredentials
from slurm_image.domain.registry_text import REGISTRY_TEXT_MAX, REMOVED, registry_text

ENTRY = RegistryCredentials("registry.example.org", "alice", "canary-pw-3c2b1a")
BASIC = ENTRY.basic().removeprefix("Basic ")


def test_the_basic_login_and_the_password_are_dropped_however_echoed() -> None:
    echoed = (
        f"got Authorization: Basic {BASIC[:8]}\x1b\u200b{BASIC[8:]} (password {ENTRY.password})"
    )
    assert registry_text(echoed, ENTRY.secrets()) == (
        f"got Authorization: Basic {REMOVED} (password {REMOVED})"
    )


def test_control_characters_are_removed_and_the_text_bounded() -> None:
    assert registry_text("a\x1b[2Jb\r\nc\x00d\u202ee") == "a[2Jbcde"
    long = registry_text("x" * 10_000)
    assert long == "x" * REGISTRY_TEXT_MAX + "..."
    assert registry_text("abcdef", limit=3) == "abc..."


def test_a_secret_is_dropped_before_the_cut() -> None:
    token = "t" * 50
    text = registry_text("y" * 190 + token, [token])
    assert text == "y" * 190 + REMOVED[: REGISTRY_TEXT_MAX - 190] + "..."


@given(st.text(), st.text(min_size=4))
def test_no_secret_survives_in_any_text(prefix: str, secret: str) -> None:
    quoted = registry_text(prefix + secret + prefix, [secret], limit=100_000)
    printable = "".join(ch for ch in secret if ch.isprintable())
    if len(printable) >= 4 and printable not in REMOVED:
        assert printable not in quoted
    assert quoted.isprintable()
