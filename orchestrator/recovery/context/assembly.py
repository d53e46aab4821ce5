"""``build_bundle``: the bundle for one diagnosis, read, capped, redacted and allocated."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.domain.baseline import Baseline
from orchestrator.domain.config import ContextLimits
from orchestrator.reading.check_reports import ReportReading
from orchestrator.recovery.context.evidence_section import (
    _evidence,
    _shorter_tail,
    _with_reports,
)
from orchestrator.recovery.context.excerpts import (
    Excerpt,
    _absent,
    _with_note,
    excerpt_of_bytes,
    excerpt_of_text,
    head_bytes,
    tail_bytes,
)
from orchestrator.recovery.context.fit import _fit, allocate_bytes
from orchestrator.recovery.context.model import (
    KEEP,
    SECTION_ORDER,
    ContextBundle,
    Section,
    SectionName,
)
from orchestrator.recovery.context.text import (
    Roots,
    _clean_note,
    _join,
    _relative,
    _size,
    _utf8,
    neutralise,
)

# Run state and record JSON up to this size lose their empty fields before the cut.
_MAX_JSON_TO_TIDY: Final = 1024 * 1024


@dataclass(frozen=True)
class BundleInputs:
    """Everything a bundle is built from. ``run_state`` and ``run_record`` are JSON text;
    ``diff`` is already bounded by the caller (``capture_head``), ``diff_truncated`` says
    there was more."""

    run_state: str
    run_record: str
    ticket_path: Path
    failed_log: Path | None
    check_name: str | None
    check_log: Path | None
    diff: bytes
    diff_truncated: bool
    diff_note: str | None = None
    # Where this machine keeps the run, the config and the interpreter the config's
    # ``{python}`` names: shown to the model as ``<clone>``, ``<state>``, ``<config>`` and
    # ``<python>`` (it needs where a file is in the project, not where this machine put
    # the project, the runs or the tools).
    clone_dir: Path | None = None
    state_dir: Path | None = None
    config_dir: Path | None = None
    python: Path | None = None
    # The failing cases the check's declared reports hold (JUnit, SARIF, TAP): typed
    # evidence, shown before the log's excerpts. None: the check declares none.
    reports: ReportReading | None = None
    # What the check's green runs print (``domain.baseline``): a line they print too is
    # ordinary output, one they never print ranks high. None: no green run learned yet.
    baseline: Baseline | None = None

    def roots(self) -> Roots:
        """(label, absolute directory) pairs, longest directory first: each directory as
        given made absolute, and with its symlinks resolved when that differs (a tool
        may print either)."""
        pairs = set()
        named = (
            ("<clone>", self.clone_dir),
            ("<state>", self.state_dir),
            ("<config>", self.config_dir),
            ("<python>", self.python),
        )
        for label, path in named:
            if path is not None:
                pairs.add((label, os.path.abspath(path)))
                pairs.add((label, os.path.realpath(path)))
        return tuple(sorted(pairs, key=lambda pair: (-len(pair[1]), pair)))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a == b or a.samefile(b)
    except OSError:
        return False


def _common_line_suffix(a: str, b: str) -> int:
    """Characters at the end of ``a`` that end ``b`` too, whole lines only."""
    n = 0
    limit = min(len(a), len(b))
    while n < limit and a[-1 - n] == b[-1 - n]:
        n += 1
    if n == len(a) or n == len(b):
        return n
    # Back to the start of a line both share entirely.
    newline = a.find("\n", len(a) - n)
    return len(a) - newline - 1 if newline >= 0 else 0


def _sent_once(tail: Excerpt, check: Excerpt) -> tuple[Excerpt, Excerpt]:
    """The log tail and the check's output without the text they share: the check's
    output (the direct evidence) keeps it, the tail keeps what only it has."""
    if not tail.text or not check.text:
        return tail, check
    if tail.text in check.text:
        note = "all of it is in check_output: sent once, there"
        return Excerpt("", tail.original_bytes, True, note, tail.original_at_least), check
    if check.text in tail.text:
        shared = len(check.text)
        if tail.text.endswith(check.text):
            kept = tail.text[: len(tail.text) - shared]
            note = "its end is check_output's text: sent once, there"
            return Excerpt(kept, tail.original_bytes, True, note), check
        return tail, check
    shared = _common_line_suffix(tail.text, check.text)
    if shared and "\n" in tail.text[len(tail.text) - shared :].rstrip("\n"):
        kept = tail.text[: len(tail.text) - shared]
        note = "its last lines are check_output's last lines: sent once, there"
        return Excerpt(kept, tail.original_bytes, True, _join(tail.note, note)), check
    return tail, check


def _excerpts(inputs: BundleInputs, limits: ContextLimits) -> dict[SectionName, Excerpt]:
    roots = inputs.roots()
    check_label = f"check {inputs.check_name}" if inputs.check_name else None
    same = (
        inputs.check_log is not None
        and inputs.failed_log is not None
        and _same_file(inputs.check_log, inputs.failed_log)
    )
    if inputs.check_log is not None:
        check = tail_bytes(inputs.check_log, limits.max_check_output_bytes, roots=roots)
    else:
        check = _absent(_join(check_label, "no check output") or "")
    if same:
        tail = _absent("the failed log is the check's log: its end is in check_output")
    elif inputs.failed_log is not None:
        tail = tail_bytes(inputs.failed_log, limits.max_log_tail_bytes, roots=roots)
    else:
        tail = _absent("no log for the failed stage")
    # The check's log is the direct evidence when there is one; else the stage's own.
    known = inputs.baseline.knows if inputs.baseline is not None else None
    by_check = inputs.check_log is not None
    evidence, confident = _evidence(
        inputs.check_log if by_check else inputs.failed_log,
        "the check's log" if by_check else "the failed stage's log",
        limits,
        sent=check if by_check else tail,
        cap=limits.max_check_output_bytes if by_check else limits.max_log_tail_bytes,
        roots=roots,
        known=known,
    )
    if inputs.reports is not None:
        evidence, from_reports = _with_reports(evidence, inputs.reports, limits, roots)
        # A failing case a test report names is a cause stated outright.
        confident = confident or from_reports
    if evidence.text and confident:
        # A cause stated outright is in the evidence, with its context: of a log too long
        # to send whole, the end is only its last word (a summary, a cleanup). Without
        # one, the tail keeps all it would hold: the cause may be there, unrecognised.
        if inputs.check_log is not None and check.truncated:
            check = _shorter_tail(inputs.check_log, limits.max_check_output_bytes, roots)
        if inputs.failed_log is not None and not same and tail.truncated:
            tail = _shorter_tail(inputs.failed_log, limits.max_log_tail_bytes, roots)
    if inputs.check_log is not None:
        check = _with_note(check, _join(check_label, check.note))
    tail, check = _sent_once(tail, check)
    diff = excerpt_of_bytes(
        inputs.diff,
        limits.max_diff_bytes,
        keep="head",
        source_truncated=inputs.diff_truncated,
        roots=roots,
    )
    return {
        "run_state": excerpt_of_text(
            _without_empty_fields(inputs.run_state),
            limits.max_run_state_bytes,
            keep="head",
            roots=roots,
        ),
        "ticket": head_bytes(inputs.ticket_path, limits.max_ticket_bytes, roots=roots),
        "run_record": excerpt_of_text(
            _without_empty_fields(inputs.run_record),
            limits.max_run_record_bytes,
            keep="tail",
            roots=roots,
        ),
        "evidence": evidence,
        "failed_log_tail": tail,
        "check_output": check,
        "diff": _with_note(diff, _join(inputs.diff_note, diff.note)),
    }


def _without_empty_fields(text: str) -> str:
    """JSON text without the fields that hold nothing (null, ``{}``, ``[]``): an attempt
    lists a dozen of them when nothing happened, and the model learns the same from
    their absence. The layout is kept (one line stays one line); text that is not JSON
    is returned as it is."""
    if len(text) > _MAX_JSON_TO_TIDY:
        return text  # only its kept end is read (``excerpt_of_text``)
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(_drop_empty(value), indent=1 if "\n" in text else None)


def _drop_empty(value: object) -> object:
    if isinstance(value, dict):
        return {
            k: _drop_empty(v) for k, v in value.items() if v is not None and v != {} and v != []
        }
    if isinstance(value, list):
        return [_drop_empty(v) for v in value]
    return value


def build_bundle(inputs: BundleInputs, limits: ContextLimits) -> ContextBundle:
    """Read, cap, redact and allocate: the bundle for one diagnosis. Never raises for
    missing files or undecodable bytes; same inputs, byte-identical bundle."""
    excerpts = _excerpts(inputs, limits)
    roots = inputs.roots()
    texts = {name: neutralise(excerpts[name].text) for name in SECTION_ORDER}
    grants = allocate_bytes(
        {name: len(_utf8(text)) for name, text in texts.items()}, limits.max_bundle_bytes
    )
    sections = []
    for name in SECTION_ORDER:
        excerpt = excerpts[name]
        text, cut, _ = _fit(texts[name], grants[name], KEEP[name])
        note = _relative(excerpt.note, roots) if excerpt.note else None
        if cut:
            cap = _size(limits.max_bundle_bytes)
            note = _join(note, f"cut further to fit the bundle cap ({cap})")
        sections.append(
            Section(
                name=name,
                text=text,
                original_bytes=excerpt.original_bytes,
                original_at_least=excerpt.original_at_least,
                truncated=excerpt.truncated or cut,
                note=_clean_note(note) if note else None,
            )
        )
    return ContextBundle(
        sections=tuple(sections),
        total_bytes=sum(s.size for s in sections),
        limits=limits,
    )
