"""An excerpt: part of a file, of bytes or of text, read by seeking, redacted and capped."""

from __future__ import annotations

import io
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.domain.terminal import plain_bytes
from orchestrator.recovery.cleaning import neutralise_unicode
from orchestrator.recovery.context.fit import _fit
from orchestrator.recovery.context.model import Keep
from orchestrator.recovery.context.text import Roots, _relative, _utf8
from orchestrator.redaction import drop_cut_edges, redact

# Extra bytes read beyond a cap so a secret crossing the cap is redacted whole (a PEM
# RSA-4096 key is about 3.3 KiB).
REDACTION_MARGIN_BYTES: Final = 8 * 1024


@dataclass(frozen=True)
class Excerpt:
    """Part of a source, decoded (U+FFFD for undecodable bytes) and redacted.

    ``original_bytes`` is the source's full size (a lower bound when
    ``original_at_least``: the source itself was cut before we saw it); ``truncated`` says
    ``text`` is not all of it; ``note`` says anything else worth knowing (a missing file,
    a cut moved to a line boundary)."""

    text: str
    original_bytes: int
    truncated: bool
    note: str | None = None
    original_at_least: bool = False


def _excerpt(
    window: bytes,
    *,
    max_bytes: int,
    keep: Keep,
    original_bytes: int,
    cut_before: bool,
    cut_after: bool,
    original_at_least: bool = False,
    roots: Roots = (),
    log: bool = False,
) -> Excerpt:
    """The pipeline every excerpt goes through: drop the partial line at a source cut (a
    secret cut there has lost the prefix that makes it recognisable), decode, show the
    ``roots`` ((label, directory) pairs) by their labels, redact, cut to ``max_bytes``
    (redaction, labels and U+FFFD can make text longer than its bytes). A ``log`` is
    shown as a reader of it sees it; a file or a diff byte for byte."""
    # Always the whole partial line, however long: a secret split by the cut is no longer
    # recognisable, so it must not be shown at all.
    window = drop_cut_edges(window, cut_before=cut_before, cut_after=cut_after)
    dropped_first, dropped_last = cut_before, cut_after
    if log:
        # What a reader of the log sees: colours, cursor moves and the stale frames of a
        # progress meter say nothing to the model. (A file's or a diff's bytes are its
        # content: a carriage return there is not a redraw.)
        window = plain_bytes(window)
    # Normalised before redaction and the cut: a look-alike of a delimiter (fullwidth
    # forms, a no-break space, a zero-width character inside it) becomes the delimiter
    # that ``neutralise`` defuses, and a secret split by invisible characters is whole.
    decoded = neutralise_unicode(window.decode("utf-8", errors="replace"))
    if roots:
        # Before redaction: a root is a known string, whatever redaction makes of it.
        decoded = _relative(decoded, roots)
    text, cut, aligned = _fit(redact(decoded), max_bytes, keep)
    truncated = cut or cut_before or cut_after
    # Which edge the reader sees: the final cut's when there was one, else the window's.
    if keep == "tail" and (aligned if cut else dropped_first):
        note: str | None = "starts at a line boundary"
    elif keep == "head" and (aligned if cut else dropped_last):
        note = "ends at a line boundary"
    else:
        note = None
    return Excerpt(text, original_bytes, truncated, note, original_at_least)


def _unreadable(path: Path, why: str) -> Excerpt:
    # The file name only: the bundle must not depend on where the state directory lives.
    return Excerpt("", 0, False, f"{why}: {path.name}")


class _NotRegularFile(OSError):
    pass


def _read_window(path: Path, want: int, keep: Keep) -> tuple[bytes, int, int]:
    """(bytes, file size, offset of the bytes): at most ``want`` bytes from the chosen end,
    by seeking — the cost does not depend on the file's size. Raises OSError."""
    # A FIFO would block open(); a directory has no bytes to show.
    if not stat.S_ISREG(path.stat().st_mode):
        raise _NotRegularFile
    with path.open("rb") as f:
        size = f.seek(0, io.SEEK_END)
        start = max(0, size - want) if keep == "tail" else 0
        f.seek(start)
        return f.read(min(want, size - start)), size, start


def _file_excerpt(
    path: Path, max_bytes: int, keep: Keep, roots: Roots, *, log: bool = False
) -> Excerpt:
    try:
        window, size, start = _read_window(path, max_bytes + REDACTION_MARGIN_BYTES, keep)
    except FileNotFoundError:
        return _unreadable(path, "no such file")
    except _NotRegularFile:
        return _unreadable(path, "not a regular file")
    except OSError as exc:
        return _unreadable(path, f"cannot read ({exc.strerror or type(exc).__name__})")
    return _excerpt(
        window,
        max_bytes=max_bytes,
        keep=keep,
        original_bytes=size,
        cut_before=start > 0,
        cut_after=start + len(window) < size,
        roots=roots,
        log=log,
    )


def tail_bytes(path: Path, max_bytes: int, *, roots: Roots = ()) -> Excerpt:
    """The end of a log: at most ``max_bytes`` of redacted UTF-8 text as a reader of it
    sees it (``terminal.plain_bytes``), each directory of ``roots`` shown by its label.
    Reads at most ``max_bytes + REDACTION_MARGIN_BYTES`` bytes, by seeking; never raises
    for a missing or unreadable file (an empty excerpt with a note)."""
    return _file_excerpt(path, max_bytes, "tail", roots, log=True)


def head_bytes(path: Path, max_bytes: int, *, roots: Roots = ()) -> Excerpt:
    """The start of a file, bounded and redacted as ``tail_bytes``, its bytes as they are
    (a source file's carriage returns and escapes are its content)."""
    return _file_excerpt(path, max_bytes, "head", roots)


def excerpt_of_bytes(
    data: bytes,
    max_bytes: int,
    *,
    keep: Keep,
    source_truncated: bool = False,
    roots: Roots = (),
) -> Excerpt:
    """An excerpt of bytes already in memory (the diff). ``source_truncated``: ``data`` is
    itself only the head of something longer (``capture_head`` stopped)."""
    want = max_bytes + REDACTION_MARGIN_BYTES
    start = max(0, len(data) - want) if keep == "tail" else 0
    window = data[start : start + want]
    return _excerpt(
        window,
        max_bytes=max_bytes,
        keep=keep,
        original_bytes=len(data),
        cut_before=start > 0,
        cut_after=source_truncated or start + len(window) < len(data),
        original_at_least=source_truncated,
        roots=roots,
    )


def excerpt_of_text(text: str, max_bytes: int, *, keep: Keep, roots: Roots = ()) -> Excerpt:
    """An excerpt of a str (the run JSON). Only the end we keep is encoded (each character
    is at least one byte, so ``want`` characters hold at least ``want`` bytes); for ASCII
    text — ``json.dumps`` output — nothing else is touched, so the cost is the cap's."""
    want = max_bytes + REDACTION_MARGIN_BYTES
    size = len(text) if text.isascii() else len(_utf8(text))
    if size <= want:
        return excerpt_of_bytes(_utf8(text), max_bytes, keep=keep, roots=roots)
    piece = text[-want:] if keep == "tail" else text[:want]
    return _excerpt(
        _utf8(piece),
        max_bytes=max_bytes,
        keep=keep,
        original_bytes=size,
        cut_before=keep == "tail" and len(piece) < len(text),
        cut_after=keep == "head" and len(piece) < len(text),
        roots=roots,
    )


def _absent(note: str) -> Excerpt:
    return Excerpt("", 0, False, note)


def _with_note(excerpt: Excerpt, note: str | None) -> Excerpt:
    return Excerpt(
        excerpt.text, excerpt.original_bytes, excerpt.truncated, note, excerpt.original_at_least
    )
