"""JUnit XML reports: each ``<testcase>`` with a ``<failure>`` or ``<error>``, streamed.

pytest ``--junitxml``, jest-junit, Maven surefire, Gradle, go-junit-report. Streamed
through defusedxml's parser (no DTD, so no entity and no external reference, ever) into a
handler that keeps only the open failure's first few KiB: memory stays flat on a 50 MB
report, and on a hostile one whose single text node is 200 MB. Nesting depth, element
count and the size of one token are bounded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from orchestrator.reading.check_reports.limits import (
    BODY_HEAD_CHARS,
    BODY_TAIL_CHARS,
    MESSAGE_CHARS,
    NAME_CHARS,
    READ_CHUNK,
    XML_MAX_DEPTH,
    XML_MAX_ELEMENTS,
    XML_MAX_TOKEN_BYTES,
)
from orchestrator.reading.check_reports.locations import _location, _location_in
from orchestrator.reading.check_reports.model import ReportCase, _Collector
from orchestrator.reading.check_reports.text import _first_line, _one_line, _size, _trace


class _Stop(Exception):
    """A report is cut short here, for the reason given (kept cases stay)."""


class _NotJUnit(Exception):
    """An XML document whose root element (given) is not a JUnit one."""


_REFUSED: Final = {
    "DTDForbidden": "a DTD",
    "EntitiesForbidden": "an entity",
    "ExternalReferenceForbidden": "an external reference",
}


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
    # Here, not at the top: a start that reads no report loads neither defusedxml nor xml.
    from defusedxml import DefusedXmlException  # type: ignore[import-untyped]
    from defusedxml.ElementTree import DefusedXMLParser, ParseError  # type: ignore[import-untyped]

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
    except ParseError as exc:  # xml.etree's
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
