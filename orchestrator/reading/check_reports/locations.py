"""Where a failure happened (``path:line``), from the frames and crash lines tools print."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote, urlsplit

from orchestrator.reading.check_reports.limits import NAME_CHARS
from orchestrator.reading.check_reports.text import _one_line

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
