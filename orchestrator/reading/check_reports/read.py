"""``read_reports``: the files a check's patterns match, each told apart by content and read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from orchestrator.reading.check_reports.files import _Glob, _open_report, _pattern_problem
from orchestrator.reading.check_reports.junit import _read_junit
from orchestrator.reading.check_reports.limits import GLOB_MAX_ENTRIES, STALE_SLACK_S
from orchestrator.reading.check_reports.model import ReportReading, _Collector
from orchestrator.reading.check_reports.sarif import _read_sarif
from orchestrator.reading.check_reports.tap import _TAP_SNIFF, _read_tap
from orchestrator.reading.check_reports.text import _one_line, _size


def _read_one(
    clone_real: Path,
    clone_roots: tuple[str, ...],
    rel: str,
    not_before: float | None,
    max_report_bytes: int,
    sink: _Collector,
) -> None:
    opened = _open_report(clone_real, rel)
    if isinstance(opened, str):
        sink.note(f"{rel}: {opened}")
        return
    fd, status = opened
    try:
        if not_before is not None and status.st_mtime < not_before - STALE_SLACK_S:
            sink.note(f"{rel}: skipped, stale: written before this check started")
            return
        if status.st_size > max_report_bytes:
            sink.note(
                f"{rel}: skipped, {_size(status.st_size)} is over the "
                f"{_size(max_report_bytes)} a report may be (not read)"
            )
            return
        if status.st_size == 0:
            sink.note(f"{rel}: skipped, empty")
            return
        start = os.pread(fd, 4096, 0).removeprefix(b"\xef\xbb\xbf").lstrip()
        if start.startswith(b"<"):
            _read_junit(fd, rel, max_report_bytes, clone_roots, sink)
        elif start.startswith(b"{"):
            _read_sarif(fd, status.st_size, rel, clone_roots, sink)
        elif _TAP_SNIFF.search(start.decode("utf-8", errors="replace")):
            _read_tap(fd, max_report_bytes, rel, clone_roots, sink)
        else:
            sink.note(f"{rel}: skipped, not a JUnit, SARIF or TAP report")
    except OSError as exc:
        sink.note(f"{rel}: reading stopped ({exc.strerror or exc})")
    except MemoryError:
        sink.note(f"{rel}: reading stopped, out of memory")
    finally:
        os.close(fd)


def read_reports(
    clone_dir: Path,
    patterns: Sequence[str],
    *,
    not_before: float | None = None,
    max_cases: int = 20,
    max_report_bytes: int = 256 * 1024 * 1024,
    max_files: int = 32,
) -> ReportReading:
    """The failing cases of the reports under ``clone_dir`` that ``patterns`` match (in
    pattern order, each pattern's matches sorted), at most ``max_files`` of them.

    ``not_before`` is the check's start (``time.time()``): an older report is stale and
    skipped. Never raises on what the clone holds; everything skipped is in ``notes``."""
    sink = _Collector(max_cases=max(0, max_cases))
    try:
        clone_real = Path(os.path.realpath(clone_dir))
    except (OSError, ValueError) as exc:
        sink.note(f"the clone {clone_dir} cannot be resolved ({exc})")
        return sink.reading()
    if not clone_real.is_dir():
        sink.note(f"the clone {clone_dir} is not a directory")
        return sink.reading()
    clone_roots = tuple(dict.fromkeys([str(clone_real), os.path.abspath(clone_dir)]))
    glob = _Glob(clone_real)
    candidates: list[str] = []
    for pattern in patterns:
        problem = _pattern_problem(pattern)
        if problem is not None:
            sink.note(f"pattern {_one_line(repr(pattern), 80)} refused: {problem}")
            continue
        matched = glob.matches(pattern)
        if not matched and glob.budget > 0:
            sink.note(f"pattern {pattern!r} matched nothing")
        candidates.extend(m for m in matched if m not in candidates)
    if glob.budget <= 0:
        sink.note(f"stopped looking for reports after {GLOB_MAX_ENTRIES:,} directory entries")
    if len(candidates) > max_files:
        sink.note(f"{len(candidates)} files matched; only the first {max_files} were read")
    for rel in candidates[: max(0, max_files)]:
        _read_one(clone_real, clone_roots, rel, not_before, max_report_bytes, sink)
    return sink.reading()
