"""TAP reports (node's test runner, node-tap, prove, bats): the ``not ok`` lines, streamed.

Read line by line; a ``not ok`` that is neither ``# SKIP`` nor ``# TODO`` fails, and the
YAML block after it is its trace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

from orchestrator.reading.check_reports.limits import (
    NAME_CHARS,
    READ_CHUNK,
    TAP_LINE_BYTES,
    TRACE_CHARS,
)
from orchestrator.reading.check_reports.locations import _location, _location_in
from orchestrator.reading.check_reports.model import ReportCase, _Collector
from orchestrator.reading.check_reports.text import _one_line, _trace

_TAP_RESULT: Final = re.compile(r"^(\s*)(not )?ok\b\s*(\d+)?\s*(?:-\s*)?(.*)$")
_TAP_DIRECTIVE: Final = re.compile(r"(?<!\\)#\s*(?:skip|todo)", re.IGNORECASE)
_TAP_SUBTEST: Final = re.compile(r"^(\s*)# Subtest: (.*)$")
_TAP_BAIL: Final = re.compile(r"^\s*Bail out!\s*(.*)$")
_TAP_SNIFF: Final = re.compile(
    r"(?m)^\s*(?:TAP version \d+|1\.\.\d+|(?:not )?ok\b|# Subtest:|Bail out!)"
)
_YAML_VALUE: Final = re.compile(r"^\s*(message|error|location|file|line|at):\s*(.*)$")


@dataclass
class _TapCase:
    name: str
    indent: int
    kind: Literal["failure", "error"] = "failure"
    message: str = ""
    block: list[str] = field(default_factory=list)
    block_chars: int = 0


def _tap_lines(fd: int, cap: int) -> Iterator[tuple[str, bool]]:
    """Each line (at most ``TAP_LINE_BYTES`` of it: the rest is read past, never held),
    and whether its bytes were valid UTF-8."""
    with os.fdopen(os.dup(fd), "rb", buffering=READ_CHUNK) as stream:
        read = 0
        continuing = False
        while read <= cap:
            piece = stream.readline(TAP_LINE_BYTES)
            if not piece:
                return
            read += len(piece)
            if not continuing:
                try:
                    yield piece.decode("utf-8").rstrip("\r\n"), True
                except UnicodeDecodeError:
                    yield piece.decode("utf-8", errors="replace").rstrip("\r\n"), False
            continuing = not piece.endswith(b"\n")


def _yaml_scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    return value


_BLOCK_SCALAR: Final = ("|", "|-", "|+", ">", ">-", ">+", "")


def _tap_case(case: _TapCase, rel: str, clone_roots: tuple[str, ...]) -> ReportCase:
    """The case, its message and location taken from its YAML block: ``message`` or
    ``error`` (node), ``location`` (node), ``file`` and ``line`` (node-tap's ``at``)."""
    indent = min((len(ln) - len(ln.lstrip()) for ln in case.block if ln.strip()), default=0)
    body = [ln[indent:] for ln in case.block]
    message = case.message
    location: str | None = None
    file: str | None = None
    line: str | None = None
    for i, raw in enumerate(body):
        found = _YAML_VALUE.match(raw)
        if found is None:
            continue
        key, value = found.group(1), _yaml_scalar(found.group(2))
        top_level = raw[:1] not in (" ", "\t")
        if top_level and key in ("message", "error") and not message:
            if value in _BLOCK_SCALAR:
                nested = [b.strip() for b in body[i + 1 : i + 8] if b.strip()]
                value = nested[0] if nested else ""
            message = value
        elif top_level and key == "location" and location is None and value:
            where = re.match(r"^(.*?):(\d+)(?::\d+)?$", value)
            location = _location(
                where.group(1) if where else value, where.group(2) if where else None, clone_roots
            )
        elif key == "file" and file is None and value:
            file = value
        elif key == "line" and line is None:
            line = value
    if location is None and file is not None:
        location = _location(file, line, clone_roots)
    if location is None:
        location = _location_in("\n".join(body), clone_roots)
    return ReportCase(
        format="tap",
        report=rel,
        name=_one_line(case.name, NAME_CHARS),
        kind=case.kind,
        message=_one_line(message),
        location=location,
        trace=_trace("\n".join(body)),
    )


def _read_tap(fd: int, cap: int, rel: str, clone_roots: tuple[str, ...], sink: _Collector) -> None:
    """Leaf failures only: node's runner reports a failing subtest, then its parent as
    ``not ok`` too (``1 subtest failed``); the parent is not another failure. Each result
    may be followed by a YAML block (indented ``---`` to ``...``): a failure's is its trace,
    any other's is passed over (its text is not read as results)."""
    sink.reports_read.append(rel)
    capturing: _TapCase | None = None
    block_indent: int | None = None  # inside a YAML block that started at this indent
    after_result: int | None = None  # the indent of the result on the line before
    failed_at: set[int] = set()  # indents at which a leaf failed, below a parent still open
    subtests: dict[int, str] = {}
    bad_utf8 = False
    for text, valid in _tap_lines(fd, cap):
        bad_utf8 = bad_utf8 or not valid
        stripped = text.strip()
        indent = len(text) - len(text.lstrip())
        if block_indent is not None:
            if stripped == "..." and indent <= block_indent:
                block_indent = None
                if capturing is not None:
                    sink.add(_tap_case(capturing, rel, clone_roots))
                    capturing = None
            elif capturing is not None and capturing.block_chars < TRACE_CHARS * 4:
                capturing.block.append(text)
                capturing.block_chars += len(text) + 1
            continue
        if after_result is not None and stripped == "---" and indent > after_result:
            block_indent, after_result = indent, None
            continue
        after_result = None
        if capturing is not None:
            sink.add(_tap_case(capturing, rel, clone_roots))
            capturing = None
        bail = _TAP_BAIL.match(text)
        if bail is not None:
            sink.failing += 1
            sink.add(_tap_case(_TapCase("Bail out!", 0, "error", bail.group(1)), rel, clone_roots))
            continue
        subtest = _TAP_SUBTEST.match(text)
        if subtest is not None:
            depth = len(subtest.group(1))
            subtests = {d: name for d, name in subtests.items() if d < depth}
            subtests[depth] = subtest.group(2).strip()
            continue
        result = _TAP_RESULT.match(text)
        if result is None:
            continue
        depth = len(result.group(1))
        after_result = depth
        parent_of_failure = any(d > depth for d in failed_at)
        failed_at = {d for d in failed_at if d <= depth}
        description = result.group(4)
        if result.group(2) is None or parent_of_failure or _TAP_DIRECTIVE.search(description):
            continue
        failed_at.add(depth)
        sink.failing += 1
        if sink.wants_case():
            label = description.split(" # ")[0].strip() or f"test {result.group(3) or '?'}"
            parents = [name for d, name in sorted(subtests.items()) if d < depth]
            capturing = _TapCase(" > ".join([*parents, label]), depth)
    if capturing is not None:  # the report ends inside (or right after) a failure
        sink.add(_tap_case(capturing, rel, clone_roots))
    if bad_utf8:
        sink.note(f"{rel}: not valid UTF-8 (the bad bytes were replaced)")
