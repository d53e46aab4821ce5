"""SARIF reports (ruff, eslint, semgrep, CodeQL): the results that fail, every field checked.

JSON, parsed only up to ``MAX_SARIF_BYTES`` (JSON does not stream cheaply); every field is
checked for its type before use.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Final

from orchestrator.reading.check_reports.limits import (
    MAX_SARIF_BYTES,
    MESSAGE_CHARS,
    NAME_CHARS,
    READ_CHUNK,
)
from orchestrator.reading.check_reports.locations import _location
from orchestrator.reading.check_reports.model import ReportCase, _Collector
from orchestrator.reading.check_reports.text import _one_line, _size, _trace


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_ARGUMENT: Final = re.compile(r"\{(\d{1,3})\}")


def _sarif_message(message: Any) -> str:
    message = _dict(message)
    text = _str(message.get("text")) or _str(message.get("markdown"))
    if text is None:
        ident = _str(message.get("id"))
        return f"(message {ident})" if ident else ""
    arguments = [a for a in _list(message.get("arguments")) if isinstance(a, str)]
    if arguments and "{" in text:
        text = _ARGUMENT.sub(
            lambda m: arguments[int(m.group(1))] if int(m.group(1)) < len(arguments) else m[0],
            text[: MESSAGE_CHARS * 8],
        )
    return text


def _sarif_location(result: dict[str, Any], clone_roots: tuple[str, ...]) -> str | None:
    for location in _list(result.get("locations"))[:1]:
        physical = _dict(_dict(location).get("physicalLocation"))
        uri = _str(_dict(physical.get("artifactLocation")).get("uri"))
        if not uri:
            return None
        line = _int(_dict(physical.get("region")).get("startLine"))
        return _location(uri, line, clone_roots)
    return None


def _sarif_snippet(result: dict[str, Any]) -> str:
    for location in _list(result.get("locations"))[:1]:
        physical = _dict(_dict(location).get("physicalLocation"))
        for region in ("region", "contextRegion"):
            text = _str(_dict(_dict(physical.get(region)).get("snippet")).get("text"))
            if text:
                return text
    return ""


def _suppressed(result: dict[str, Any]) -> bool:
    # A suppression without a status, or "accepted", hides the result (SARIF 3.34.3).
    return any(
        isinstance(s, dict) and s.get("status", "accepted") == "accepted"
        for s in _list(result.get("suppressions"))
    )


def _sarif_cases(document: Any, rel: str, clone_roots: tuple[str, ...], sink: _Collector) -> None:
    """The results of a failing check's SARIF report: those of level ``error``, or, when
    there are none, those of level ``warning`` (a tool run to fail on warnings, or rules
    with no level: SARIF's default is ``warning``). ``note`` and ``none`` never fail; nor do
    suppressed results, nor those whose ``kind`` is not ``fail``."""
    by_level: dict[str, list[tuple[dict[str, Any], str]]] = {"error": [], "warning": []}
    for each_run in _list(_dict(document).get("runs")):
        run = _dict(each_run)
        rules = _list(_dict(_dict(run.get("tool")).get("driver")).get("rules"))
        rule_ids: list[str | None] = []
        default_level: dict[str, str] = {}
        for each_rule in rules[:100_000]:
            rule = _dict(each_rule)
            ident = _str(rule.get("id"))
            rule_ids.append(ident)
            level = _str(_dict(rule.get("defaultConfiguration")).get("level"))
            if ident is not None and level is not None:
                default_level[ident] = level
        for result in _list(run.get("results")):
            if not isinstance(result, dict):
                continue
            if result.get("kind", "fail") != "fail" or _suppressed(result):
                continue
            rule_id = _str(result.get("ruleId")) or _str(_dict(result.get("rule")).get("id"))
            index = _int(result.get("ruleIndex"))
            if rule_id is None and index is not None and 0 <= index < len(rule_ids):
                rule_id = rule_ids[index]
            rule_id = rule_id or "(no rule)"
            level = _str(result.get("level")) or default_level.get(rule_id, "warning")
            if level in by_level:
                by_level[level].append((result, rule_id))
    failing = by_level["error"] or by_level["warning"]
    if failing and not by_level["error"]:
        sink.note(f"{rel}: no error-level results; its {len(failing)} warnings are shown")
    sink.failing += len(failing)
    for result, rule_id in failing:
        if not sink.wants_case():
            break
        location = _sarif_location(result, clone_roots)
        message = _sarif_message(result.get("message"))
        rest = message.split("\n", 1)[1] if "\n" in message else ""
        name = f"{_one_line(rule_id, 120)} {location}" if location else rule_id
        sink.add(
            ReportCase(
                format="sarif",
                report=rel,
                name=_one_line(name, NAME_CHARS),
                kind="failure",
                message=_one_line(message),
                location=location,
                trace=_trace(_sarif_snippet(result) or rest),
            )
        )


def _read_sarif(
    fd: int, size: int, rel: str, clone_roots: tuple[str, ...], sink: _Collector
) -> None:
    if size > MAX_SARIF_BYTES:
        sink.note(f"{rel}: JSON of {_size(size)} is over the {_size(MAX_SARIF_BYTES)} parsed")
        return
    data = _read_all(fd, MAX_SARIF_BYTES)
    if data is None:
        sink.note(f"{rel}: grew past {_size(MAX_SARIF_BYTES)} while being read")
        return
    text = data.decode("utf-8-sig", errors="replace")
    if "\ufffd" in text and b"\xef\xbf\xbd" not in data:
        sink.note(f"{rel}: not valid UTF-8 (the bad bytes were replaced)")
    try:
        document = json.loads(text)
    except RecursionError:
        sink.note(f"{rel}: JSON nested too deeply to parse")
        return
    except ValueError as exc:
        sink.note(f"{rel}: unparsable JSON ({_one_line(str(exc), 120)})")
        return
    if not isinstance(document, dict) or "runs" not in document or "version" not in document:
        sink.note(f"{rel}: JSON, but not a SARIF report (no 'runs' and 'version')")
        return
    sink.reports_read.append(rel)
    _sarif_cases(document, rel, clone_roots, sink)


def _read_all(fd: int, cap: int) -> bytes | None:
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(fd, READ_CHUNK):
        total += len(chunk)
        if total > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
