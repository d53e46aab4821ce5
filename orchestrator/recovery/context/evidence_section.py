"""The evidence section: the reports' failing cases and the log's root-cause excerpts.

And the tail policy beside it: once the evidence states a cause, a long log's tail keeps
only its last ``TAIL_BYTES_WITH_EVIDENCE``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final

from orchestrator.domain.config import ContextLimits
from orchestrator.reading.check_reports import ReportReading, render_reports
from orchestrator.reading.evidence import CONTEXT_LINES, extract_evidence, render_evidence
from orchestrator.recovery.cleaning import neutralise_unicode
from orchestrator.recovery.context.excerpts import (
    Excerpt,
    _absent,
    _unreadable,
    _with_note,
    tail_bytes,
)
from orchestrator.recovery.context.fit import _fit
from orchestrator.recovery.context.text import Roots, _join, _relative, _size, _utf8
from orchestrator.redaction import redact

# What a log's tail keeps when the evidence section holds its error lines (with their
# context): the last lines say how the run ended; the megabytes above them were read by
# the evidence scan already.
TAIL_BYTES_WITH_EVIDENCE: Final = 2 * 1024


def _evidence(
    path: Path | None,
    label: str,
    limits: ContextLimits,
    *,
    sent: Excerpt,
    cap: int,
    roots: Roots,
    known: Callable[[bytes], bool] | None = None,
) -> tuple[Excerpt, bool]:
    """The root-cause excerpts of ``path``; an empty excerpt saying why when none; and
    whether they hold a cause stated outright (``Evidence.confident``).
    ``sent`` is what the bundle sends of the log's end (capped at ``cap``). Lines the
    bundle sends anyway are not sent twice: when the log goes uncut, the excerpts show
    the matched lines alone (with their numbers); when it is cut, the bundle keeps only
    its last ``TAIL_BYTES_WITH_EVIDENCE`` once there is evidence (``_excerpts``), and an
    excerpt inside those shows its matched lines alone."""
    if path is None:
        return _absent("no log to look for evidence in"), False
    whole = bool(sent.text) and not sent.truncated
    # (a line that starts past the shorter tail's first byte is kept whole by it: the tail
    # drops its cut first line only)
    tail_from = sent.original_bytes - min(cap, TAIL_BYTES_WITH_EVIDENCE) + 1
    try:
        found = extract_evidence(
            path,
            window_bytes=limits.evidence_scan_bytes,
            max_bytes=limits.max_evidence_bytes,
            context_lines=0 if whole else CONTEXT_LINES,
            tail_from=None if whole or not sent.text else tail_from,
            known=known,
        )
    except FileNotFoundError:
        return _unreadable(path, "no such file"), False
    except OSError as exc:
        return _unreadable(path, f"cannot read ({exc.strerror or type(exc).__name__})"), False
    shown = len(found.excerpts)
    if shown:
        what = (
            f"{shown} excerpt{'s' if shown != 1 else ''} of {label} "
            # Not '>' itself: a note cannot hold a delimiter's characters.
            f"({_size(found.size)}), most telling first; the matched lines are marked"
            + ("; the log is below in full, so no context lines" if whole else "")
        )
    else:
        scanned = _size(found.size - found.window_start)
        what = f"no known error line in {label} (scanned {scanned})"
    # Look-alikes of a delimiter are made plain here too (see ``_excerpt``).
    text = neutralise_unicode(render_evidence(found))
    if roots:
        # A label can be longer than the directory it names: cut back to the cap whole
        # excerpt lines at a time.
        text, _, _ = _fit(_relative(text, roots), limits.max_evidence_bytes, "head")
    return Excerpt(text, found.size, False, _join(what, found.note)), found.confident


def _with_reports(
    evidence: Excerpt, reading: ReportReading, limits: ContextLimits, roots: Roots
) -> tuple[Excerpt, bool]:
    """The evidence with the reports' failing cases first (up to half its cap, the
    log's excerpts keep the rest), and whether the reports name a failing case."""
    budget = limits.max_evidence_bytes // 2
    text = render_reports(reading, budget)
    if not text:
        return evidence, False
    text = neutralise_unicode(_relative(redact(text), roots))
    text, _, _ = _fit(text, budget, "head")
    block = f"--- the check's reports ---\n{text.rstrip()}\n"
    rest, _, _ = _fit(evidence.text, limits.max_evidence_bytes - len(_utf8(block)), "head")
    named = len(reading.cases)
    what = f"{named} failing case{'s' if named != 1 else ''} from the check's reports"
    return (
        Excerpt(block + rest, evidence.original_bytes, False, _join(what, evidence.note)),
        named > 0,
    )


def _shorter_tail(path: Path, cap: int, roots: Roots) -> Excerpt:
    """The end of a log whose error lines are in the evidence section."""
    shorter = tail_bytes(path, min(cap, TAIL_BYTES_WITH_EVIDENCE), roots=roots)
    return _with_note(shorter, _join(shorter.note, "its error lines are in evidence"))
