"""The one quoting function, read back by a real bash."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from slurm_image.domain.errors import InvalidIdentifier
from slurm_image.domain.shell import quote

SHELLISH = "'\"$`\\\n\t !*?[]{}~#;&|<>()=:,%@+-^\u00e9\u2603\U0001f433"
values = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=40),
    st.text(alphabet=SHELLISH, max_size=20),
)


def bash_reads(script: str) -> bytes:
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", script],
        capture_output=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
        timeout=30,
    )
    return done.stdout


@given(st.lists(values, min_size=1, max_size=8))
@example(["", "'", "''", "\\", "$HOME", "`id`", "$(id)", "a\nb", "~", "-n", "*", "é"])
def test_quote_round_trips_through_bash_as_an_argument(texts: list[str]) -> None:
    script = "printf '%s\\0' " + " ".join(quote(text) for text in texts)
    out = bash_reads(script)
    assert out.split(b"\0")[:-1] == [text.encode("utf-8") for text in texts]


@given(st.lists(values, min_size=1, max_size=8))
@example(["a:~", "~root", "x=y", "a b", "!!"])
def test_quote_round_trips_through_bash_as_a_readonly_value(texts: list[str]) -> None:
    lines = [f"readonly V{i}={quote(text)}" for i, text in enumerate(texts)]
    lines.append("printf '%s\\0' " + " ".join(f'"$V{i}"' for i in range(len(texts))))
    out = bash_reads("\n".join(lines))
    assert out.split(b"\0")[:-1] == [text.encode("utf-8") for text in texts]


@given(values)
def test_quote_gives_one_word(text: str) -> None:
    out = bash_reads(f"set -- {quote(text)}; printf '%s' $#")
    assert out == b"1"


@pytest.mark.parametrize("text", ["a\x00b", "\x00", "ok\x00"])
def test_quote_refuses_nul(text: str) -> None:
    with pytest.raises(InvalidIdentifier) as caught:
        quote(text, "ENROOT_SQUASH_OPTIONS")
    assert caught.value.field == "ENROOT_SQUASH_OPTIONS"
    assert "NUL" in caught.value.rule


@pytest.mark.parametrize("text", ["cpu", "/lustre/x.sqsh", "a=b", "sha256:ab", "1:00:00"])
def test_quote_leaves_safe_words_bare(text: str) -> None:
    assert quote(text) == text


@pytest.mark.parametrize("text", ["", "a b", "$x", "~", "*", "a'b", "é"])
def test_quote_quotes_everything_else(text: str) -> None:
    assert quote(text).startswith("'")
