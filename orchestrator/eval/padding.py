"""Ordinary build output to bury a failure in: ``orchestrator eval --pad`` puts about a
megabyte of it before and after each case's log, so the measure says whether the cause
is still found when the log is as long as a real CI job's.

The padding is what a green build prints (compiler progress, package downloads, passing
tests, timestamps, hashes, paths, durations) in the styles of cargo, npm, pip, maven,
gradle, make/cmake, pytest, go test and docker, and carries none of the words a failure is
told by (``ERROR_VOCABULARY``; a test holds it to that). It is seeded: the same seed, case
and size give the same bytes. Its line ending is the log's.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Final, TypeVar

T = TypeVar("T")

PAD_BYTES: Final = 1024 * 1024  # before and after: 2 MiB around each log
PAD_SEED: Final = 20260412
BOM: Final = b"\xef\xbb\xbf"

# Words (lower-cased substrings) that tell a failure; none may occur in the padding.
ERROR_VOCABULARY: Final = (
    "error", "err!", "fail", "fatal", "exception", "warn", "denied", "refused", "timeout",
    "timed out", "kill", "not found", "abort", "panic", "traceback", "cannot", "can't",
    "unable", "invalid", "missing", "segfault", "segmentation", "oom", "no such",
    "undefined", "unresolved", "forbidden", "unauthorized", "permission", "rate limit",
    "quota", "out of memory", "no space", "crash", "assert", "mismatch", "conflict",
    "reject", "retry", "unavailable", "deprecat", "exit code", "exit status", "problem",
    "broken", "expected", "unexpected", "violation", "offense", "skipped", "interrupt",
)  # fmt: skip

_CRATES = (
    "serde", "tokio", "libc", "rand", "regex", "syn", "quote", "bytes", "mio", "log",
    "itoa", "memchr", "hashbrown", "indexmap", "smallvec", "futures-util", "clap", "toml",
    "once_cell", "cfg-if", "proc-macro2", "unicode-ident", "base64", "url", "hyper",
)  # fmt: skip
_NPM = (
    "react", "lodash", "chalk", "commander", "debug", "semver", "glob", "minimist",
    "webpack", "babel-core", "postcss", "typescript", "eslint-scope", "yargs", "uuid",
    "ms", "mime-types", "inherits", "safe-buffer", "readable-stream", "picomatch",
)  # fmt: skip
_PYPI = (
    "requests", "numpy", "six", "urllib3", "certifi", "idna", "attrs", "packaging",
    "pyparsing", "setuptools", "wheel", "click", "jinja2", "markupsafe", "pytz", "tomli",
    "pluggy", "iniconfig", "coverage", "pygments", "charset-normalizer",
)  # fmt: skip
_MAVEN = (
    ("org/apache/commons", "commons-lang3"), ("com/google/guava", "guava"),
    ("org/slf4j", "slf4j-api"), ("junit", "junit"), ("org/hamcrest", "hamcrest-core"),
    ("com/fasterxml/jackson/core", "jackson-databind"), ("org/mockito", "mockito-core"),
    ("org/apache/maven/plugins", "maven-surefire-plugin"), ("io/netty", "netty-buffer"),
)  # fmt: skip
_WORDS = (
    "core", "util", "parser", "render", "config", "io", "net", "cache", "model", "view",
    "store", "index", "schema", "client", "server", "codec", "stream", "graph", "table",
)  # fmt: skip
_GO_MODS = ("github.com/acme/api", "github.com/acme/store", "golang.org/x/text", "example.org/kit")


STAMPS: Final = ("none", "iso", "clock", "elapsed")
# Each stamp style's pool of blocks is about this large; a side draws its blocks from one.
POOL_BYTES: Final = 2 * 1024 * 1024


class _Pad:
    """A random walk through blocks of one tool's output, each line stamped alike."""

    def __init__(self, rng: random.Random, stamp: str) -> None:
        self.rng = rng
        self.random = rng.random
        self.clock = self.below(40_000)  # seconds into the day
        self.stamp = stamp

    # ``random()`` is C; ``randrange`` and ``choice`` cost five times as much in Python,
    # and two megabytes a case is a few hundred thousand draws.
    def below(self, start: int, stop: int | None = None) -> int:
        """``randrange(start, stop)`` (or ``randrange(start)``), drawn with ``random()``."""
        if stop is None:
            start, stop = 0, start
        return start + int(self.random() * (stop - start))

    def pick(self, options: Sequence[T]) -> T:
        return options[int(self.random() * len(options))]

    def _version(self) -> str:
        return f"{self.below(0, 5)}.{self.below(0, 40)}.{self.below(0, 30)}"

    def _hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def _path(self) -> str:
        parts = [self.pick(_WORDS) for _ in range(self.below(1, 4))]
        return "/".join(parts) + "/" + self.pick(_WORDS) + "_" + self.pick(_WORDS)

    def _seconds(self) -> str:
        return f"{self.random() * self.pick((1, 10, 100)):.2f}s"

    def _prefix(self) -> str:
        self.clock += self.below(0, 3)
        h, m, s = self.clock // 3600 % 24, self.clock // 60 % 60, self.clock % 60
        if self.stamp == "iso":
            return f"2026-01-01T{h:02d}:{m:02d}:{s:02d}.{self.below(10**7):07d}Z "
        if self.stamp == "clock":
            return f"[{h:02d}:{m:02d}:{s:02d}] "
        if self.stamp == "elapsed":
            return f"[{self.clock // 60:4d}:{s:02d}] "
        return ""

    def cargo(self) -> Iterator[str]:
        for _ in range(self.below(5, 60)):
            crate = self.pick(_CRATES)
            yield self.pick(
                (
                    f"   Compiling {crate} v{self._version()}",
                    f"  Downloaded {crate} v{self._version()}",
                    f"    Checking {crate} v{self._version()}",
                    f"       Fresh {crate} v{self._version()}",
                )
            )
        yield f"    Finished dev [unoptimized + debuginfo] target(s) in {self._seconds()}"

    def npm(self) -> Iterator[str]:
        for _ in range(self.below(5, 60)):
            pkg = self.pick(_NPM)
            yield (
                f"npm http fetch GET 200 https://registry.npmjs.org/{pkg}/-/{pkg}-"
                f"{self._version()}.tgz {self.below(3, 900)}ms (cache {self.pick(('hit', 'miss'))})"
            )
        yield f"added {self.below(50, 1500)} packages in {self._seconds()}"

    def pip(self) -> Iterator[str]:
        names = []
        for _ in range(self.below(3, 25)):
            pkg, version = self.pick(_PYPI), self._version()
            names.append(f"{pkg}-{version}")
            size = self.below(10, 9000)
            yield f"Collecting {pkg}=={version}"
            yield f"  Downloading {pkg}-{version}-py3-none-any.whl ({size} kB)"
            yield f"     {'#' * 32} {size} kB {self.below(1, 60)}.{self.below(10)} MB/s"
        yield "Installing collected packages: " + ", ".join(n.rsplit("-", 1)[0] for n in names)
        yield "Successfully installed " + " ".join(names)

    def maven(self) -> Iterator[str]:
        module = self.pick(_WORDS)
        yield f"[INFO] --- maven-compiler-plugin:3.8.1:compile (default-compile) @ {module} ---"
        for _ in range(self.below(5, 40)):
            group, artifact = self.pick(_MAVEN)
            version = self._version()
            url = f"https://repo.maven.apache.org/maven2/{group}/{artifact}/{version}/{artifact}-{version}.jar"
            yield f"[INFO] Downloading from central: {url}"
            yield f"[INFO] Downloaded from central: {url} ({self.below(2, 900)} kB at {self.below(100, 9000)} kB/s)"
        yield f"[INFO] Compiling {self.below(3, 400)} source files to /home/runner/work/app/{module}/target/classes"
        for _ in range(self.below(2, 20)):
            yield f"[INFO] Running com.acme.{module}.{self.pick(_WORDS).title()}{self.pick(_WORDS).title()}Test"

    def gradle(self) -> Iterator[str]:
        module = self.pick(_WORDS)
        for task in (
            "compileJava",
            "processResources",
            "classes",
            "jar",
            "compileTestJava",
            "test",
        ):
            suffix = self.pick(("", "", " UP-TO-DATE", " FROM-CACHE", " NO-SOURCE"))
            yield f"> Task :{module}:{task}{suffix}"
        yield f"Download https://plugins.gradle.org/m2/com/acme/{self.pick(_WORDS)}/{self._version()}/x.pom"

    def make(self) -> Iterator[str]:
        target = self.pick(_WORDS)
        yield f"make[{self.below(1, 4)}]: Entering directory '/home/travis/build/acme/app/{target}'"
        n = self.below(5, 60)
        for i in range(n):
            source = f"{self._path()}.{self.pick(('c', 'cpp', 'cc'))}"
            yield self.pick(
                (
                    f"[{100 * i // n:3d}%] Building CXX object src/CMakeFiles/{target}.dir/{source}.o",
                    f"gcc -O2 -g -Wall -fPIC -Iinclude -c {source} -o {source}.o",
                    f"  CC       {source}.lo",
                )
            )
        yield f"[100%] Linking CXX static library lib{target}.a"
        yield f"make[1]: Leaving directory '/home/travis/build/acme/app/{target}'"

    def pytest(self) -> Iterator[str]:
        module = f"tests/test_{self.pick(_WORDS)}.py"
        n = self.below(5, 80)
        for i in range(n):
            yield f"{module}::test_{self.pick(_WORDS)}_{self.pick(_WORDS)}[{i}] PASSED{' ' * 8}[{100 * (i + 1) // n:3d}%]"

    def go(self) -> Iterator[str]:
        for _ in range(self.below(3, 30)):
            name = f"Test{self.pick(_WORDS).title()}{self.pick(_WORDS).title()}"
            yield f"=== RUN   {name}"
            yield f"--- PASS: {name} ({self.random():.2f}s)"
        yield f"ok  \t{self.pick(_GO_MODS)}/{self.pick(_WORDS)}\t{self._seconds()}"

    def docker(self) -> Iterator[str]:
        yield f"Step {self.below(1, 20)}/{self.below(20, 40)} : RUN make -j{self.below(2, 9)} {self.pick(_WORDS)}"
        for _ in range(self.below(3, 12)):
            yield f"{self._hex(12)}: Pull complete"
        yield f"Digest: sha256:{self._hex(64)}"
        yield f" ---> {self._hex(12)}"

    def blocks(self) -> Iterator[str]:
        """Blocks of whole lines (each ended by LF), one tool's output each."""
        tools: tuple[Callable[[], Iterator[str]], ...] = (
            self.cargo, self.npm, self.pip, self.maven, self.gradle, self.make, self.pytest,
            self.go, self.docker,
        )  # fmt: skip
        while True:
            yield "".join(f"{self._prefix()}{line}\n" for line in self.pick(tools)())


@functools.cache
def _pool(seed: int, stamp: str) -> tuple[str, ...]:
    # Drawing two fresh megabytes for each side of each case is most of a padded run's
    # time; a side is instead a seeded draw of blocks from its style's pool (memory only).
    pool: list[str] = []
    total = 0
    for block in _Pad(random.Random(f"{seed}:{stamp}"), stamp).blocks():
        pool.append(block)
        total += len(block)
        if total >= POOL_BYTES:
            return tuple(pool)
    raise AssertionError("unreachable: blocks() never ends")


def padding(size: int, *, seed: int, salt: str, newline: bytes = b"\n") -> bytes:
    """At least ``size`` bytes (whole lines, each ended by ``newline``) of ordinary build
    output; the same ``seed`` and ``salt`` give the same bytes, another salt other bytes."""
    if size <= 0:
        return b""
    rng = random.Random(f"{seed}:{salt}")
    pool = _pool(seed, rng.choice(STAMPS))
    chunks: list[str] = []
    total = 0
    while total < size:
        block = pool[int(rng.random() * len(pool))]
        chunks.append(block)
        total += len(block)
    text = "".join(chunks)
    if newline != b"\n":
        text = text.replace("\n", newline.decode("ascii"))
    return text.encode("utf-8")


def newline_of(log: bytes) -> bytes:
    """The log's most common line ending: LF, CRLF, or CR CR LF (a PTY's ``onlcr`` on
    CRLF output). A log without one gets LF."""
    cr_cr_lf = log.count(b"\r\r\n")
    crlf = log.count(b"\r\n") - cr_cr_lf
    lf = log.count(b"\n") - crlf - cr_cr_lf
    counts = {b"\n": lf, b"\r\n": crlf, b"\r\r\n": cr_cr_lf}
    return max(counts, key=lambda ending: (counts[ending], ending == b"\n"))


def pad_log(log: bytes, *, size: int = PAD_BYTES, seed: int = PAD_SEED, salt: str = "") -> bytes:
    """``log`` with ``size`` bytes of padding before and after, in the log's line ending.
    A leading byte-order mark stays at the very start (where a reader expects it)."""
    bom = BOM if log.startswith(BOM) else b""
    body = log[len(bom) :]
    newline = newline_of(body)
    before = padding(size, seed=seed, salt=f"{salt}:before", newline=newline)
    after = padding(size, seed=seed, salt=f"{salt}:after", newline=newline)
    joint = b"" if not body or body.endswith(b"\n") else newline
    return b"".join((bom, before, body, joint, after))
