"""What a terminal shows: control sequences and the stale frames of a redrawn line go,
nothing else does, and no line is joined or split (the evidence scan relies on it to
place a line found in the plain text)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.domain.terminal import plain, plain_bytes

# Sequences real tools print (pytest, gcc, mypy through curses, ruff, ls, terminal titles).
SEQUENCES = [
    "\x1b[31m",  # SGR colour
    "\x1b[0m",
    "\x1b[m",
    "\x1b[1;38;5;9m",  # 256 colours
    "\x1b[38;2;255;0;0m",  # true colour
    "\x1b[K",  # erase to the end of the line (gcc)
    "\x1b[2J",  # clear the screen
    "\x1b[?25l",  # hide the cursor (a private parameter)
    "\x1b[1G",
    "\x1b(B",  # select the character set (tput sgr0, mypy)
    "\x1b7",  # save the cursor
    "\x1b]0;a title\x07",  # OSC ended by BEL
    "\x1b]8;;file:///tmp/x.py\x1b\\",  # a hyperlink (OSC 8), ended by ST
]


@pytest.mark.parametrize("sequence", SEQUENCES)
def test_each_sequence_goes_and_the_text_around_it_stays(sequence: str) -> None:
    assert plain(f"FAILED{sequence} tests/x.py") == "FAILED tests/x.py"
    assert plain_bytes(f"a{sequence}b".encode()) == b"ab"


def test_real_tool_lines_read_as_a_reader_sees_them() -> None:
    gcc = (
        "\x1b[01m\x1b[Kmain.c:2:12:\x1b[m\x1b[K \x1b[01;31m\x1b[Kerror: \x1b[m\x1b[K"
        "‘\x1b[01m\x1b[Kx\x1b[m\x1b[K’ undeclared"
    )
    assert plain(gcc) == "main.c:2:12: error: ‘x’ undeclared"
    mypy = (
        'typed.py:2: \x1b[1m\x1b[31merror:\x1b(B\x1b[m Incompatible (got \x1b(B\x1b[m\x1b[1m"str"'
    )
    assert plain(mypy) == 'typed.py:2: error: Incompatible (got "str"'


def test_text_without_an_escape_is_returned_as_it_is() -> None:
    data = b"no escapes here\r\n\ttab\x07bell\n"
    assert plain_bytes(data) is data
    text = "plain text"
    assert plain(text) is text


def test_what_is_not_a_sequence_stays() -> None:
    # A lone ESC and an ESC before a line break are kept, so the printable form still
    # shows that something odd was there; an OSC with no end on its line is not taken
    # across the line break (only its ESC ] goes, as a two-byte escape).
    assert plain("a\x1b") == "a\x1b"
    assert plain("a\x1b\nb") == "a\x1b\nb"
    assert plain("a\x1b]0;title\nb\x07") == "a0;title\nb\x07"


@given(
    st.lists(
        st.one_of(
            st.sampled_from(SEQUENCES),
            st.text(
                alphabet=st.characters(codec="utf-8", exclude_characters="\x1b\r"), max_size=12
            ),
        ),
        max_size=30,
    )
)
def test_every_sequence_goes_whatever_surrounds_it_and_no_line_is_joined(parts: list[str]) -> None:
    text = "".join(parts)
    seen = plain(text)
    assert "\x1b" not in seen
    assert seen == "".join(p for p in parts if p not in SEQUENCES)
    assert seen.count("\n") == text.count("\n")
    assert plain_bytes(text.encode()) == seen.encode()


def test_a_redrawn_line_keeps_its_last_frame() -> None:
    # Maven's transfer progress, a spinner before npm's error, curl's meter.
    maven = "Progress (1): 4/12 kB\rProgress (1): 8/12 kB\rProgress (1): 12/12 kB\n[ERROR] x\n"
    assert plain(maven) == "Progress (1): 12/12 kB\n[ERROR] x\n"
    assert plain("\x1b[K⠙\r\x1b[Knpm ERR! code E404\n") == "npm ERR! code E404\n"
    assert plain_bytes(b"a\rb\rc\r\nd") == b"c\r\nd"


def test_crlf_line_breaks_are_not_redraws() -> None:
    text = "one\r\ntwo\r\n"
    assert plain(text) is text
    assert plain("ends in a return\r") == "ends in a return\r"
    # A PTY's onlcr on CRLF output: the line is shown, its break is one CRLF.
    assert plain("\r\r\n") == "\r\n"
    assert plain("FAILED test_x\r\r\nnext\r\r\n") == "FAILED test_x\r\nnext\r\n"
    assert plain_bytes(b"a\rb\r\r\n") == b"b\r\n"  # a redraw still keeps its last frame


def test_a_byte_order_mark_is_not_shown() -> None:
    assert plain("\ufeffError: x\n\ufeffnext") == "Error: x\nnext"
    assert plain_bytes("\ufeffError: x\n".encode()) == b"Error: x\n"


@given(st.lists(st.sampled_from(["a", "b", "\r", "\n", "\x1b[0m"]), max_size=60).map("".join))
def test_no_line_is_joined_and_every_carriage_return_left_ends_its_line(text: str) -> None:
    seen = plain(text)
    assert seen.count("\n") == text.count("\n")
    for line in seen.split("\n")[:-1]:
        assert "\r" not in line[:-1]  # at most one, just before the line break
    assert plain_bytes(text.encode()) == seen.encode()
