"""Log text for a terminal: what any writer put into a job's log (the job, Enroot, the image
through the job's copy of its output) is printed with its control characters escaped, so that no
log can move the cursor, clear the screen, set a window title or rewrite what was printed before.
"""

from __future__ import annotations

import codecs
import unicodedata

# The characters that reorder the text around them (Unicode's bidirectional controls): a line
# could otherwise print other than it reads.
_BIDI_CONTROLS = frozenset(
    chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)
)
_KEPT = frozenset("\t\n")


def _escaped(character: str) -> str:
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab and newline (C0, DEL, C1) and every
    bidirectional control written as ``\\xHH`` or ``\\uHHHH``; everything else as it is."""
    if text.isprintable():
        return text
    return "".join(
        _escaped(character)
        if (character not in _KEPT and unicodedata.category(character) == "Cc")
        or character in _BIDI_CONTROLS
        else character
        for character in text
    )


class LogDecoder:
    """Bytes of one log, in pieces, to text for a terminal: UTF-8 (bytes that are not are
    U+FFFD), a character split between two pieces decoded whole, controls escaped."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def text(self, data: bytes, *, final: bool = False) -> str:
        return escape_controls(self._decoder.decode(data, final))
