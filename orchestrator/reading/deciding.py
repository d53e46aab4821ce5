"""A failure's deciding lines (issue 44): the few lines of its log that say what it is,
from which its signature is made (``domain.failure_signature``).

* An infrastructure failure is decided by the sign's evidence line: the detail the
  attempt was recorded with ends ``what [sign]: <the line>``; that line is it.
* Any other failure by the marked lines of the most telling excerpt of its log (the
  evidence section the bundle shows, ``reading.evidence``): its root-cause lines.
* When neither says anything, the log's last error line (``reading.error_lines``).

Every line returned is redacted (the evidence and the last error line are redacted as they
are read; a sign's detail was redacted when the attempt was recorded). Reads the log.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from orchestrator.domain.config import ContextLimits
from orchestrator.domain.failure_signature import MAX_LINES
from orchestrator.reading.error_lines import last_error_line_of
from orchestrator.reading.evidence import extract_evidence
from orchestrator.redaction import redact

# ``Recognised.detail()``: "what [sign-name]: line".
_SIGN_DETAIL: Final = re.compile(r"^.*? \[[a-z0-9-]+\]: (?P<line>.+)$")
# A marked line of a rendered excerpt: ">  12| text".
_MARKED: Final = re.compile(r"^>\s*\d+\| (?P<text>.*)$")
# The runner's own lines at the head of a log (``execution.runner``): the command line
# holds the words its failure prints (``bash -c '... echo error: ...'``), and the sandbox's
# description; neither is the failure, and a signature made of them is the config's.
_RUNNER_LINES: Final = ("# orchestrator: ", "# $ ")


def deciding_lines(
    log_path: Path | None,
    *,
    failure_class: str | None,
    detail: str | None,
    limits: ContextLimits,
) -> tuple[str, ...]:
    """The lines that decide this failure, at most ``MAX_LINES``, most telling first; ()
    when the log says nothing readable."""
    if failure_class not in (None, "code") and detail:
        sign = _SIGN_DETAIL.match(detail)
        if sign is not None:
            return (redact(sign.group("line")),)
    if log_path is None:
        return ()
    try:
        evidence = extract_evidence(
            log_path,
            window_bytes=limits.evidence_scan_bytes,
            max_bytes=limits.max_evidence_bytes,
            context_lines=0,
        )
    except OSError:
        evidence = None
    if evidence is not None and evidence.excerpts:
        best = evidence.excerpts[0]
        marked = [
            m.group("text").strip()
            for line in best.text.splitlines()
            if (m := _MARKED.match(line)) is not None
            and not m.group("text").startswith(_RUNNER_LINES)
        ]
        if marked:
            return tuple(marked[:MAX_LINES])
    said = last_error_line_of(log_path)
    return (said,) if said else ()
