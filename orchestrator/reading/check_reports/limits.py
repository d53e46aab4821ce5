"""The bounds on reading a check's reports: text kept per case, bytes, elements, files."""

from __future__ import annotations

from typing import Final

MiB: Final = 1 << 20
MESSAGE_CHARS: Final = 300
NAME_CHARS: Final = 300
TRACE_LINES: Final = 12
TRACE_CHARS: Final = 1500
# A failure's body is kept up to this many characters from its start (the message, the
# trace's first lines, most location shapes) and this many from its end (pytest's crash
# line, ``tests/test_x.py:4: AssertionError``, ends it).
BODY_HEAD_CHARS: Final = 4096
BODY_TAIL_CHARS: Final = 1024
MAX_SARIF_BYTES: Final = 16 * MiB
XML_MAX_DEPTH: Final = 256
# A 50 MB surefire or pytest report holds well under a million elements; parsing this many
# costs a few seconds, the bound on a hostile one.
XML_MAX_ELEMENTS: Final = 2_000_000
# Expat holds a single token (a tag, an attribute value, a comment) whole: a report in
# which what it holds past where it stands grows over this is cut there.
XML_MAX_TOKEN_BYTES: Final = 16 * MiB
READ_CHUNK: Final = 64 * 1024
TAP_LINE_BYTES: Final = 8192
# How many directory entries the globs of one reading may look at (a `**` over a clone
# with its node_modules must not take minutes).
GLOB_MAX_ENTRIES: Final = 100_000
MAX_NOTES: Final = 32
# Filesystem timestamps come from a coarse clock (a tick, up to 10 ms, behind
# ``time.time()``) and some filesystems keep whole seconds (HFS+) or even ones (FAT): a
# report written just after the check started must not be taken for an earlier run's.
STALE_SLACK_S: Final = 2.0
PATTERN_MAX_CHARS: Final = 256
