"""Printing a log (domain/log_text.py): no control character reaches the terminal raw, and the
job's copy of the image's output (step image-output) escapes as the host does."""

from __future__ import annotations

import subprocess
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from slurm_image.domain import job_steps
from slurm_image.domain.log_text import LogDecoder, escape_controls


def printable(text: str) -> bool:
    return all(c in "\t\n" or unicodedata.category(c) != "Cc" for c in text)


def test_every_c0_c1_and_del_is_escaped_and_tab_and_newline_are_kept() -> None:
    for code in [*range(0x20), 0x7F, *range(0x80, 0xA0)]:
        character = chr(code)
        expected = character if character in "\t\n" else f"\\x{code:02x}"
        assert escape_controls(f"a{character}b") == f"a{expected}b"


def test_bidirectional_controls_are_escaped_and_other_text_is_kept() -> None:
    assert escape_controls("\u202eexe.txt") == "\\u202eexe.txt"
    assert escape_controls("\u2066x\u2069") == "\\u2066x\\u2069"
    assert escape_controls("héllo €, 漢字, tab\tend") == "héllo €, 漢字, tab\tend"


@given(st.text())
def test_nothing_escaped_is_a_control_character(text: str) -> None:
    assert printable(escape_controls(text))


@given(st.binary(), st.integers(min_value=1, max_value=7))
def test_a_log_read_in_pieces_prints_as_read_whole(data: bytes, size: int) -> None:
    decoder = LogDecoder()
    pieces = [data[i : i + size] for i in range(0, len(data), size)]
    printed = "".join(decoder.text(piece) for piece in pieces) + decoder.text(b"", final=True)
    assert printed == escape_controls(data.decode("utf-8", "replace"))


def test_the_job_s_copy_of_the_image_s_output_escapes_as_the_host_prints() -> None:
    lines = [bytes([code]) + b"x" for code in [*range(0x20), 0x7F] if code != 0x0A]
    lines += [chr(code).encode() + b"x" for code in range(0x80, 0xA0)]
    lines.append("é€ plain".encode())
    data = b"\n".join(lines) + b"\nno newline at the end"
    program = (
        "set -euo pipefail\nsay() { printf 'slurm-image: %s\\n' \"$*\" >&2; }\n"
        + job_steps.step("image-output")
        + "copy_image_output\n"
    )
    done = subprocess.run(
        ["bash", "-c", program],
        input=data,
        capture_output=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    copied = done.stderr.decode()
    expected = [
        "image: " + escape_controls(line.decode()).replace("\\x", "\\xc2\\x")
        if 0x80 <= ord(line.decode()[0]) < 0xA0
        else "image: " + escape_controls(line.decode())
        for line in [*lines, b"no newline at the end"]
    ]
    assert copied.splitlines() == expected
    assert copied.endswith("no newline at the end\n")
