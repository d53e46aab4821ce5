"""Structured results first: the failing cases a check's own reports name (issue 25).

A check may declare the reports it writes (``reports = ["junit.xml", "**/*.sarif"]`` in
its config). When it fails, its failing cases — name, message, ``path:line``, the first
lines of the trace — are better evidence than anything found by reading its log, because
the tool itself said which case failed and where. Three formats, told apart by content:

* JUnit XML (pytest ``--junitxml``, jest-junit, Maven surefire, Gradle, go-junit-report):
  a ``<testcase>`` with a ``<failure>`` or ``<error>`` child. Streamed through defusedxml's
  parser (no DTD, so no entity and no external reference, ever) into a handler that keeps
  only the open failure's first few KiB: memory stays flat on a 50 MB report, and on a
  hostile one whose single text node is 200 MB. Nesting depth, element count and the size
  of one token are bounded.
* SARIF (ruff, eslint, semgrep, CodeQL): JSON, parsed only up to 16 MiB (JSON does not
  stream cheaply); every field is checked for its type before use.
* TAP (node's test runner, node-tap, prove, bats): streamed line by line; a ``not ok``
  that is neither ``# SKIP`` nor ``# TODO`` fails, and the YAML block after it is its trace.

Everything in a clone is untrusted. A report is read only if it is a regular file whose
real path stays inside the clone and not under ``.git``, opened with ``O_NOFOLLOW`` and
``O_NONBLOCK`` (a FIFO does not hang) and checked on its descriptor; one written before the
check started is stale (an earlier run's failures are not this run's). Whatever is skipped
or cut short says why in ``notes``; nothing here raises on a report's content.

Text is cleaned (terminal sequences, control characters, bidi overrides, lone surrogates
removed) and bounded, but not redacted: the bundle redacts everything it shows.

Layer: reading, above domain. Reads files; writes none.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import unquote, urlsplit

from defusedxml import DefusedXmlException  # type: ignore[import-untyped]
from defusedxml.ElementTree import DefusedXMLParser  # type: ignore[import-untyped]
from pydantic import Field

from orchestrator.domain.terminal import plain
from orchestrator.domain.validation import Frozen

__all__ = [
    "ReportCase",
    "ReportFormat",
    "ReportReading",
    "read_reports",
    "render_reports",
]

ReportFormat = Literal["junit", "sarif", "tap"]

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

_Message = Annotated[str, Field(max_length=MESSAGE_CHARS)]
_Short = Annotated[str, Field(max_length=NAME_CHARS)]


class ReportCase(Frozen):
    """One failing case a report names.

    ``kind`` is JUnit's distinction: ``error`` when the case could not run as written (an
    exception outside an assertion, a fixture or set-up failure, a TAP ``Bail out!``),
    ``failure`` otherwise. Every SARIF result is a ``failure``: a finding is the tool's
    verdict on the code, as an assertion is, whatever its SARIF level."""

    format: ReportFormat
    report: Annotated[str, Field(max_length=4096)]
    name: _Short
    kind: Literal["failure", "error"]
    message: _Message
    location: _Short | None
    trace: Annotated[str, Field(max_length=TRACE_CHARS)]


class ReportReading(Frozen):
    """What a check's reports say failed. ``cases`` are the first ``max_cases`` failing
    ones in report order; ``failing`` counts all of them; ``notes`` say what was skipped
    or cut short, and why."""

    cases: tuple[ReportCase, ...] = ()
    failing: Annotated[int, Field(ge=0)] = 0
    reports_read: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


# --------------------------------------------------------------------------- text


_CONTROL: Final = re.compile(
    # C0 and C1 controls but tab and newline; bidi overrides and isolates, zero-width
    # characters (text that reads differently from what it says); lone surrogates (JSON
    # escapes can make them; no UTF-8 encoder takes them).
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_SPACES: Final = re.compile(r"\s+")


def _clean(text: str) -> str:
    return _CONTROL.sub("", plain(text).replace("\r\n", "\n").replace("\r", "\n"))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cleaned, its line breaks and runs of blanks made single spaces, cut."""
    return _cut(_SPACES.sub(" ", _clean(text[: limit * 8])).strip(), limit)


def _first_line(text: str, limit: int = MESSAGE_CHARS) -> str:
    for line in _clean(text[: limit * 8]).split("\n"):
        if line.strip():
            return _one_line(line, limit)
    return ""


def _trace(text: str) -> str:
    """The first ``TRACE_LINES`` lines of ``text`` (blank ones at either end dropped),
    within ``TRACE_CHARS``."""
    lines = [ln.rstrip() for ln in _clean(text[: TRACE_CHARS * 4]).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    kept: list[str] = []
    size = 0
    for line in lines[:TRACE_LINES]:
        cost = len(line) + (1 if kept else 0)
        if size + cost > TRACE_CHARS:
            if not kept:
                kept.append(_cut(line, TRACE_CHARS))
            break
        kept.append(line)
        size += cost
    while kept and not kept[-1]:
        kept.pop()
    return "\n".join(kept)


# --------------------------------------------------------------------------- locations


# pytest's crash line ends a failure's body: ``tests/test_x.py:4: AssertionError``.
_PYTEST_CRASH: Final = re.compile(r"(?m)^([^\s:\"'<>()][^\s:]*\.\w+):(\d+):(?: |$)")
_PY_FRAME: Final = re.compile(r'File "([^"\n]+)", line (\d+)')
_JAVA_FRAME: Final = re.compile(
    r"\bat ([\w$.<>/@]+)\(([\w$.-]+\.(?:java|kt|scala|groovy|clj)):(\d+)\)"
)
_JAVA_FRAMEWORK: Final = (
    "java.", "javax.", "jdk.", "sun.", "com.sun.", "kotlin.", "kotlinx.", "scala.",
    "groovy.", "org.codehaus.groovy.", "org.junit.", "junit.", "org.opentest4j.",
    "org.assertj.", "org.hamcrest.", "org.mockito.", "org.testng.", "org.spockframework.",
    "org.springframework.", "org.apache.maven.", "org.gradle.", "worker.org.gradle.",
)  # fmt: skip
_GO_LINE: Final = re.compile(r"(?m)^\s+([\w./-]+\.go):(\d+):")
_JS_FRAME: Final = re.compile(
    r"\bat (?:[^\n()]{0,200}\()?((?:file://)?(?:[A-Za-z]:)?[^\s():]+\.(?:[cm]?[jt]sx?|vue|svelte))"
    r":(\d+)(?::\d+)?\)?"
)
_LINE_NUMBER: Final = re.compile(r"\d{1,9}", re.ASCII)


def _uri_path(uri: str) -> str:
    """The path of a ``file:`` URI, any other text as it is."""
    if not uri.startswith("file:"):
        return uri
    try:
        return unquote(urlsplit(uri).path)
    except ValueError:  # "file://[..." is not a URI urlsplit accepts
        return uri


def _relative(path: str, clone_roots: tuple[str, ...]) -> str:
    """An absolute path inside the clone as relative to it; any other path as it is."""
    path = _uri_path(path)
    for root in clone_roots:
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
    return path


def _location(path: str, line: str | int | None, clone_roots: tuple[str, ...]) -> str:
    where = _one_line(_relative(path, clone_roots), NAME_CHARS - 12)
    if isinstance(line, int):
        line = str(line) if 0 <= line < 10**9 else None
    elif line is not None and not _LINE_NUMBER.fullmatch(line):
        line = None
    return f"{where}:{line}" if line is not None else where


def _java_frame(body: str, test_class: str) -> re.Match[str] | None:
    """The first frame in the project's own code (the test class's top two packages,
    ``com.example.``), else the first outside the JDK and the frameworks (an assertion
    library's frame is where it threw, not what failed), else the first."""
    frames = list(_JAVA_FRAME.finditer(body))
    # "java.base/java.lang.Foo.bar", "app//com.x.FooTest.bar": the module goes first.
    classes = [m.group(1).rpartition("/")[2] for m in frames]
    if test_class.count(".") >= 2:
        own = ".".join(test_class.split(".")[:2]) + "."
        for frame, cls in zip(frames, classes, strict=True):
            if cls.startswith(own):
                return frame
    for frame, cls in zip(frames, classes, strict=True):
        if not cls.startswith(_JAVA_FRAMEWORK):
            return frame
    return frames[0] if frames else None


def _location_in(body: str, clone_roots: tuple[str, ...], test_class: str = "") -> str | None:
    """Where a failure's body says it happened, from the shapes tools print, or None."""
    # The last crash line and the last traceback frame: the innermost.
    crashes = _PYTEST_CRASH.findall(body) or _PY_FRAME.findall(body)
    if crashes:
        return _location(crashes[-1][0], crashes[-1][1], clone_roots)
    java = _java_frame(body, test_class)
    if java is not None:
        return _location(java.group(2), java.group(3), clone_roots)
    go = _GO_LINE.search(body)
    if go is not None:
        return _location(go.group(1), go.group(2), clone_roots)
    for js in _JS_FRAME.finditer(body):
        path = js.group(1)
        if "node_modules" not in path and not path.startswith(("node:", "internal/")):
            return _location(path, js.group(2), clone_roots)
    return None


# --------------------------------------------------------------------------- collecting


@dataclass
class _Collector:
    """The reading being built, across every report of one call."""

    max_cases: int
    cases: list[ReportCase] = field(default_factory=list)
    failing: int = 0
    reports_read: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_notes: int = 0

    def note(self, text: str) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append(_one_line(text, 400))
        else:
            self.dropped_notes += 1

    def wants_case(self) -> bool:
        return len(self.cases) < self.max_cases

    def add(self, case: ReportCase) -> None:
        if self.wants_case():
            self.cases.append(case)

    def reading(self) -> ReportReading:
        notes = list(self.notes)
        if self.dropped_notes:
            notes.append(f"{self.dropped_notes} more notes not kept")
        return ReportReading(
            cases=tuple(self.cases),
            failing=self.failing,
            reports_read=tuple(self.reports_read),
            notes=tuple(notes),
        )


class _Stop(Exception):
    """A report is cut short here, for the reason given (kept cases stay)."""


class _NotJUnit(Exception):
    """An XML document whose root element (given) is not a JUnit one."""


_REFUSED: Final = {
    "DTDForbidden": "a DTD",
    "EntitiesForbidden": "an entity",
    "ExternalReferenceForbidden": "an external reference",
}


# --------------------------------------------------------------------------- JUnit


@dataclass
class _OpenFailure:
    classname: str
    name: str
    file: str | None
    line: str | None
    kind: Literal["failure", "error"]
    message: str | None
    head: list[str] = field(default_factory=list)
    head_chars: int = 0
    tail: str = ""
    cut: bool = False

    def take(self, text: str) -> None:
        room = BODY_HEAD_CHARS - self.head_chars
        if room > 0:
            self.head.append(text[:room])
            self.head_chars += min(room, len(text))
            text = text[room:]
        if text:
            self.cut = True
            self.tail = (self.tail + text)[-BODY_TAIL_CHARS:]

    def body(self) -> tuple[str, str]:
        """The body's head, and head plus tail for finding where it failed."""
        head = "".join(self.head)
        return head, (head + "\n" + self.tail if self.cut else head)


# go-junit-report's message is "Failed" whatever failed; the body says what.
_SAYS_NOTHING: Final = re.compile(r"\s*(?:fail(?:ed|ure)?|error)?\s*", re.IGNORECASE)


def _attr(attrib: dict[str, str], key: str, limit: int = 1024) -> str | None:
    value = attrib.get(key)
    return value[:limit] if isinstance(value, str) else None


def _pytest_name(classname: str, name: str, location: str | None) -> str | None:
    """``tests/test_x.py::TestA::test_b`` from pytest's ``tests.test_x.TestA`` and
    ``test_b``, when the failure's location names the module's file."""
    if location is None:
        return None
    path = location.rsplit(":", 1)[0]
    if not path.endswith(".py") or path.startswith("/"):
        return None
    module = path[:-3].replace("/", ".")
    if classname == module:
        return f"{path}::{name}"
    if classname.startswith(module + "."):
        return "::".join([path, *classname[len(module) + 1 :].split("."), name])
    return None


def _junit_name(classname: str, name: str, location: str | None) -> str:
    pytest_style = _pytest_name(classname, name, location)
    if pytest_style is not None:
        return pytest_style
    # jest-junit writes "{classname} {title}" as both by default.
    if not classname or name == classname or name.startswith(classname + " "):
        return name or "(unnamed case)"
    return f"{classname}.{name}" if name else classname


class _JUnitHandler:
    """Expat's handlers, set straight on the parser defusedxml made (its DTD, entity and
    external-reference handlers stay): ElementTree's Python wrappers around them, and a
    call for every run of whitespace between elements, cost more than the parse itself.
    Text is asked for only inside an open failure. Keeps the open ``<testcase>``'s names
    and the open failure's bounded body, nothing else."""

    def __init__(self, rel: str, clone_roots: tuple[str, ...], sink: _Collector) -> None:
        self.rel = rel
        self.clone_roots = clone_roots
        self.sink = sink
        self.expat: Any = None
        self.depth = 0
        self.elements = 0
        self.testcase: list[str] | None = None
        self.testcase_depth = 0
        self.testcase_failed = False
        self.failure: _OpenFailure | None = None
        self.found = 0
        self.recognised = False

    def attach(self, expat: Any) -> None:
        self.expat = expat
        expat.StartElementHandler = self.start
        expat.EndElementHandler = self.end
        expat.CharacterDataHandler = None
        # Without a DTD, expat refuses an undefined entity itself; nothing else it would
        # pass to a default handler is needed here.
        expat.DefaultHandlerExpand = None
        expat.CommentHandler = None
        expat.ProcessingInstructionHandler = None

    def start(self, tag: str, attributes: list[str]) -> None:
        self.depth += 1
        self.elements += 1
        if self.depth > XML_MAX_DEPTH:
            raise _Stop(f"nested deeper than {XML_MAX_DEPTH} elements")
        if self.elements > XML_MAX_ELEMENTS:
            raise _Stop(f"over {XML_MAX_ELEMENTS:,} elements")
        local = tag.rpartition("}")[2] if "}" in tag else tag
        if self.depth == 1:
            if local not in ("testsuites", "testsuite"):
                raise _NotJUnit(f"<{_one_line(local, 40)}>")
            self.recognised = True
            self.sink.reports_read.append(self.rel)
        if local == "testcase":
            # Kept as expat gave them (name, value, name, ...): most cases pass.
            self.testcase = attributes
            self.testcase_depth = self.depth
            self.testcase_failed = False
        elif (
            local in ("failure", "error")
            and self.testcase is not None
            and self.depth == self.testcase_depth + 1
            and not self.testcase_failed
        ):
            self.testcase_failed = True
            self.sink.failing += 1
            self.found += 1
            if self.sink.wants_case():
                case = dict(zip(self.testcase[::2], self.testcase[1::2], strict=False))
                attrib = dict(zip(attributes[::2], attributes[1::2], strict=False))
                self.failure = _OpenFailure(
                    classname=_attr(case, "classname") or "",
                    name=_attr(case, "name") or "",
                    file=_attr(case, "file") or None,
                    line=_attr(case, "line", 12) or None,
                    kind="failure" if local == "failure" else "error",
                    message=_attr(attrib, "message", MESSAGE_CHARS * 8),
                )
                self.expat.CharacterDataHandler = self.data

    def data(self, text: str) -> None:
        if self.failure is not None:
            self.failure.take(text)

    def end(self, tag: str) -> None:
        if self.failure is not None and self.depth == self.testcase_depth + 1:
            self.flush()
        if self.depth == self.testcase_depth:
            self.testcase = None
        self.depth -= 1

    def close(self) -> None:
        return None

    def flush(self) -> None:
        """The open failure becomes a case (at its end tag, or where the report was cut)."""
        failure, self.failure = self.failure, None
        if self.expat is not None:
            self.expat.CharacterDataHandler = None
        if failure is None:
            return
        head, searchable = failure.body()
        location = _location_in(searchable, self.clone_roots, failure.classname)
        if failure.file:
            # The report's own file (and line: the test's, pytest's xunit1 counts from 0),
            # unless the trace names a line in that same file: where it failed.
            named = _location(failure.file, failure.line, self.clone_roots)
            traced_path = location.rpartition(":")[0] if location else ""
            if not traced_path or Path(traced_path).name != Path(named).name.split(":")[0]:
                location = named
        message = failure.message
        if message is None or _SAYS_NOTHING.fullmatch(message):
            message = _first_line(head) or message or ""
        self.sink.add(
            ReportCase(
                format="junit",
                report=self.rel,
                name=_one_line(_junit_name(failure.classname, failure.name, location), NAME_CHARS),
                kind=failure.kind,
                message=_one_line(message),
                location=location,
                trace=_trace(head),
            )
        )


def _read_junit(
    fd: int, rel: str, cap: int, clone_roots: tuple[str, ...], sink: _Collector
) -> None:
    handler = _JUnitHandler(rel, clone_roots, sink)
    why: str | None = None
    try:
        parser = DefusedXMLParser(
            target=handler, forbid_dtd=True, forbid_entities=True, forbid_external=True
        )
        handler.attach(parser.parser)
        fed = 0
        pending = 0
        # Expat (before 2.6) tokenizes a token it holds from its start again with every
        # chunk fed: a chunk as big as what it holds keeps a long token's cost linear (and
        # no bigger than what would take it past the limit, which is checked between).
        while chunk := os.read(
            fd, max(READ_CHUNK, min(pending, XML_MAX_TOKEN_BYTES + 1 - pending))
        ):
            fed += len(chunk)
            if fed > cap:
                raise _Stop(f"grew past the {_size(cap)} cap while being read")
            parser.feed(chunk)
            # Where expat stands: what lies past it is one token it holds whole.
            pending = fed - parser.parser.CurrentByteIndex
            if pending > XML_MAX_TOKEN_BYTES:
                raise _Stop(f"holds a single XML token over {_size(XML_MAX_TOKEN_BYTES)}")
        parser.close()
    except _NotJUnit as root:
        sink.note(f"{rel}: skipped, XML but not a JUnit report (its root element is {root})")
        return
    except _Stop as stop:
        why = str(stop)
    except DefusedXmlException as refused:
        what = _REFUSED.get(type(refused).__name__, "a forbidden construct")
        why = f"refused: it declares {what} (DTDs and entities are never read)"
    except ElementTree.ParseError as exc:
        line, column = getattr(exc, "position", (0, 0))
        reason = _one_line(str(exc).split(":", 1)[0], 80)
        why = f"unparsable at line {line}, column {column} ({reason})"
    except (LookupError, UnicodeError) as exc:  # an encoding expat asks Python's codecs for
        why = f"unreadable encoding ({_one_line(str(exc), 80)})"
    except RecursionError:
        why = "nested too deeply to parse"
    if why is None:
        return
    handler.flush()  # a failure cut off mid-body is still a failing case
    if not handler.recognised:
        sink.note(f"{rel}: skipped, {why}")
        return
    kept = handler.found
    sink.note(f"{rel}: {why}; {kept} failing case{'s' if kept != 1 else ''} read before that")


# --------------------------------------------------------------------------- SARIF


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


# --------------------------------------------------------------------------- TAP


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


# --------------------------------------------------------------------------- files


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n:,} bytes"


def _pattern_problem(pattern: object) -> str | None:
    if not isinstance(pattern, str) or not pattern.strip():
        return "it is empty"
    if len(pattern) > PATTERN_MAX_CHARS:
        return f"it is over {PATTERN_MAX_CHARS} characters"
    if "\x00" in pattern:
        return "it holds a NUL character"
    if pattern.startswith("/") or ".." in pattern.split("/"):
        return "it must be relative to the clone, without '..'"
    if ".git" in pattern.split("/"):
        return "it names .git, which is never read"
    return None


@dataclass
class _Glob:
    """Pattern matching under the clone, pathlib-style (``*`` within one name, ``**`` any
    number of directories), that never descends through a symlink or into ``.git`` and
    stops after ``GLOB_MAX_ENTRIES`` directory entries."""

    root: Path
    budget: int = GLOB_MAX_ENTRIES

    def names(self, directory: Path) -> list[tuple[str, bool]]:
        """(name, is a real directory) of each entry, within the budget."""
        out: list[tuple[str, bool]] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if self.budget <= 0:
                        break
                    self.budget -= 1
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        is_dir = False
                    out.append((entry.name, is_dir))
        except OSError:
            return []
        return sorted(out)

    def matches(self, pattern: str) -> list[str]:
        parts = [p for p in pattern.split("/") if p not in ("", ".")]
        if parts and parts[-1] == "**":  # every file below, rather than pathlib's directories
            parts.append("*")
        found: list[str] = []
        self._walk((), parts, found)
        return list(dict.fromkeys(found))

    def _walk(self, at: tuple[str, ...], parts: list[str], found: list[str]) -> None:
        if not parts:
            return
        here = self.root.joinpath(*at)
        head, rest = parts[0], parts[1:]
        if head == "**":
            self._walk(at, rest, found)
            for name, is_dir in self.names(here):
                if is_dir and name != ".git":
                    self._walk((*at, name), parts, found)
            return
        if not any(c in head for c in "*?["):
            path = here / head
            if not rest:
                if os.path.lexists(path):
                    found.append("/".join((*at, head)))
            elif os.path.islink(path) and not _inside(self.root, path):
                # Named outright, so said: the one "match", refused with a note.
                found.append("/".join((*at, head)))
            elif os.path.isdir(path):
                self._walk((*at, head), rest, found)
            return
        for name, is_dir in self.names(here):
            if name == ".git" or not fnmatch.fnmatchcase(name, head):
                continue
            if not rest:
                found.append("/".join((*at, name)))
            elif is_dir:
                self._walk((*at, name), rest, found)


def _inside(root: Path, path: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real == root or root in real.parents


def _open_report(clone_real: Path, rel: str) -> tuple[int, os.stat_result] | str:
    """An open descriptor of the report and its status, or why it is not read."""
    if ".git" in rel.split("/"):
        return "skipped, .git is never read"
    real = Path(os.path.realpath(clone_real / rel))
    if clone_real not in real.parents:
        return "skipped, its real path is outside the clone"
    if ".git" in real.relative_to(clone_real).parts:
        return "skipped, .git is never read"
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        return f"skipped, cannot open it ({exc.strerror or exc})"
    try:
        status = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        return f"skipped, cannot read its status ({exc.strerror or exc})"
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        return f"skipped, not a regular file (a {_file_kind(status.st_mode)})"
    return fd, status


def _file_kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
    ):  # fmt: skip
        if test(mode):
            return name
    return "special file"


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


# --------------------------------------------------------------------------- rendering


def _ranked(cases: Sequence[ReportCase]) -> list[ReportCase]:
    """Most useful first: the first case of each cause (a SARIF rule, a JUnit or TAP
    message) before any cause's second, and so on; within a round, errors (a case that
    could not run: often what the others follow from) before failures; then report order."""
    seen: dict[tuple[str, str], int] = {}
    keyed = []
    for index, case in enumerate(cases):
        cause = case.name.split(" ", 1)[0] if case.format == "sarif" else case.message
        round_ = seen.get((case.format, cause), 0)
        seen[(case.format, cause)] = round_ + 1
        keyed.append((round_, case.kind != "error", index, case))
    return [case for *_, case in sorted(keyed, key=lambda k: k[:3])]


def _block(case: ReportCase) -> str:
    lines = [f"[{case.format} {case.kind}] {case.name}"]
    if case.location and case.location not in case.name:
        lines.append(f"  at {case.location}")
    if case.message:
        lines.append(f"  {case.message}")
    if case.trace:
        lines.extend(f"  | {line}" if line else "  |" for line in case.trace.split("\n"))
    lines.append(f"  (from {case.report})")
    return "\n".join(lines)


def render_reports(reading: ReportReading, max_bytes: int) -> str:
    """The bundle's text: a heading, then one block per case, most useful first, whole
    blocks only (one that does not fit is left out and a smaller later one may take its
    place), then the notes that fit; all within ``max_bytes`` of UTF-8. Empty when
    nothing was read and nothing is to be said."""
    if not reading.reports_read and not reading.notes:
        return ""
    blocks = [_block(case) for case in _ranked(reading.cases)]
    notes = [f"note: {n}" for n in reading.notes]

    def heading(shown: int) -> str:
        where = ", ".join(reading.reports_read) or "none"
        count = reading.failing
        text = f"{count} failing case{'s' if count != 1 else ''} in reports read: {where}"
        return _cut(text, 400) + (f" (showing {shown})" if shown < count else "")

    def size(parts: list[str]) -> int:
        return len("\n".join(parts).encode("utf-8"))

    # The heading's length depends on how many blocks are shown: choose the blocks against
    # the longest heading it can have, then write the true one (never longer).
    chosen: list[str] = [heading(0) + " " * len(str(len(blocks)))]
    if size(chosen) > max_bytes:
        return ""
    for part in blocks:
        if size([*chosen, part]) <= max_bytes:
            chosen.append(part)
    shown = len(chosen) - 1
    for part in notes:
        if size([*chosen, part]) <= max_bytes:
            chosen.append(part)
    chosen[0] = heading(shown)
    return "\n".join(chosen)
