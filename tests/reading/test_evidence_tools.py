"""Evidence from real tools' output: each tool is run on a tiny project in a temp dir, its
output padded with megabytes of ordinary output before and after, and the root-cause
line must reach the bundle — within its caps, byte-identical when built twice."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.domain.config import ContextLimits
from orchestrator.recovery.context import BundleInputs, ContextBundle, build_bundle

# Each test starts a real tool (pytest, ruff, gcc, javac…) and reads 4 MiB around its
# output: most take 0.1-0.7 s alone and stay in the quick tier; those over 1 s (the JVM's,
# pip's and mypy's start, the million-byte storm) are marked slow.
SLOW = pytest.mark.slow

PAD_BYTES = 2 * 1024 * 1024


@functools.cache  # the same bytes for every test: made once
def padding(tag: str, size: int) -> bytes:
    line = f"{tag} ordinary progress: step done, all fine, nothing to see here\n".encode()
    return b"".join(line.replace(b"step", b"step %d" % i) for i in range(size // len(line)))


def run(argv: list[str], cwd: Path, **env: str) -> bytes:
    """The tool's combined output; a failure is what we want, so the exit code is ignored.
    A pytest among them runs as a project's own would, without this suite's plugins
    (hypothesis alone costs 2 s of CPU at each start)."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **env},
        timeout=60,
        check=False,
    )
    return done.stdout


def bundle_for(tmp_path: Path, output: bytes, **limits: int) -> tuple[ContextBundle, Path]:
    log = tmp_path / "review-tests.log"
    log.write_bytes(padding("before", PAD_BYTES) + output + padding("after", PAD_BYTES))
    ticket = tmp_path / "T-1.md"
    ticket.write_text('+++\nid = "T-1"\n+++\nFix it.\n')
    inputs = BundleInputs(
        run_state=json.dumps({"state": "recovering"}),
        run_record=json.dumps([{"number": 1}]),
        ticket_path=ticket,
        failed_log=log,
        check_name="tests",
        check_log=log,
        diff=b"",
        diff_truncated=False,
    )
    first = build_bundle(inputs, ContextLimits(**limits))
    second = build_bundle(inputs, ContextLimits(**limits))
    assert first.model_dump_json() == second.model_dump_json()  # deterministic
    assert first.total_bytes <= first.limits.max_bundle_bytes
    evidence = first.section("evidence")
    assert evidence.size <= first.limits.max_evidence_bytes
    return first, log


def line_number_of(log: Path, needle: bytes) -> int:
    with log.open("rb") as f:
        for number, line in enumerate(f, start=1):
            if needle in line:
                return number
    raise AssertionError(f"{needle!r} not in {log}")


def assert_found(bundle: ContextBundle, log: Path, needle: str) -> None:
    """``needle``'s line is in the evidence, marked, with its true line number — and it
    is not in the tail (the padding after it pushed it out)."""
    evidence = bundle.section("evidence").text
    number = line_number_of(log, needle.encode())
    marked = [line for line in evidence.splitlines() if line.startswith(">")]
    assert any(f"{number}| " in line and needle in line for line in marked), evidence
    assert needle not in bundle.section("check_output").text


def test_pytest_assertion_and_summary(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "test_deal.py").write_text(
        "def deal(n):\n    return n + 1\n\n\ndef test_deal():\n    assert deal(2) == 2\n"
    )
    output = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert b"assert 3 == 2" in output
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "E       assert 3 == 2")
    assert_found(bundle, log, "FAILED test_deal.py::test_deal")
    # The assertion comes first: the most telling excerpt leads.
    assert bundle.section("evidence").text.startswith("--- lines ")
    assert "pytest-assertion" in bundle.section("evidence").text.splitlines()[0]


def as_gh_prints_it(output: bytes, job: str, step: str) -> bytes:
    """``output`` as ``gh run view --log`` prints a step's log: the job's and the step's
    names, tab-separated, before each line's timestamp; a byte-order mark before the
    step's first clock (cli/cli#9210)."""
    lines = output.decode().splitlines()
    marks = ["\ufeff"] + [""] * len(lines)
    stamped = [
        f"{job}\t{step}\t{marks[n]}2026-12-01T02:53:{n % 60:02d}.1234567Z {line}"
        for n, line in enumerate(lines)
    ]
    return ("\n".join(stamped) + "\n").encode()


def test_pytest_and_ruff_as_gh_run_view_prints_them(tmp_path: Path) -> None:
    # The same root-cause lines, found behind gh's columns, with their true line numbers.
    module("ruff")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "test_deal.py").write_text(
        "import os\n\n\ndef deal(n):\n    return n + 1\n\n\ndef test_deal():\n"
        "    assert deal(2) == 2\n"
    )
    tests = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    lint = run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        project,
    )
    assert b"assert 3 == 2" in tests and b"F401" in lint
    output = as_gh_prints_it(lint, "lint", "Run ruff") + as_gh_prints_it(
        tests, "test / py3.11", "Run pytest"
    )
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "E       assert 3 == 2")
    assert_found(bundle, log, "FAILED test_deal.py::test_deal")
    assert_found(bundle, log, "test_deal.py:1:8: F401")


def test_unittest_failure_and_exception(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "test_u.py").write_text(
        "import unittest\n\n\nclass T(unittest.TestCase):\n"
        "    def test_sum(self):\n        self.assertEqual(sum([1, 2]), 4)\n"
    )
    output = run([sys.executable, "-m", "unittest", "test_u"], project)
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "AssertionError: 3 != 4")
    assert_found(bundle, log, "FAIL: test_sum (test_u.T")


def test_python_import_error(tmp_path: Path) -> None:
    output = run([sys.executable, "-c", "import nonexistent_module_xyz"], tmp_path)
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "ModuleNotFoundError: No module named 'nonexistent_module_xyz'")


@SLOW
def test_pip_install_of_a_missing_package(tmp_path: Path) -> None:
    output = run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--disable-pip-version-check",
         "no-such-package-h6"],
        tmp_path,
    )  # fmt: skip
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "ERROR: No matching distribution found for no-such-package-h6")


def git(cwd: Path, *args: str) -> bytes:
    env = {
        "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
    }  # fmt: skip
    return run(["git", *args], cwd, **env)


def test_git_merge_conflict(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "deal.py").write_text("n = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "other")
    (repo / "deal.py").write_text("n = 2\n")
    git(repo, "commit", "-qam", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "deal.py").write_text("n = 3\n")
    git(repo, "commit", "-qam", "main")
    output = git(repo, "merge", "other")
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "CONFLICT (content): Merge conflict in deal.py")


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        pytest.skip(f"{name} is not installed")


def test_gcc_and_make(tmp_path: Path) -> None:
    tool("gcc")
    project = tmp_path / "c"
    project.mkdir()
    (project / "deal.c").write_text("int main(void) { return undefined_thing; }\n")
    (project / "Makefile").write_text("deal: deal.c\n\tgcc -o deal deal.c\n")
    output = run([tool("make")], project, LC_ALL="C")
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "error: 'undefined_thing' undeclared")
    assert_found(bundle, log, "make: ***")


def test_rustc(tmp_path: Path) -> None:
    rustc = tool("rustc")
    (tmp_path / "deal.rs").write_text('fn main() { let n: u32 = "one"; }\n')
    output = run([rustc, "--color", "never", "deal.rs"], tmp_path)
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "error[E0308]: mismatched types")


@SLOW
def test_javac(tmp_path: Path) -> None:
    javac = tool("javac")
    (tmp_path / "Deal.java").write_text('class Deal { int n = "one"; }\n')
    output = run([javac, "Deal.java"], tmp_path, LC_ALL="C")
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "Deal.java:1: error: incompatible types")


def test_node_exception(tmp_path: Path) -> None:
    node = tool("node")
    output = run([node, "-e", "JSON.parse('{broken')"], tmp_path)
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "SyntaxError: ")


@pytest.mark.parametrize(
    "make_output",
    [
        pytest.param(lambda: b"", id="nothing"),
        pytest.param(
            lambda: b"E   assert 1 == 2\n" * 50_000, id="a million-byte storm", marks=SLOW
        ),
        pytest.param(lambda: b"x" * (3 * 1024 * 1024), id="one 3 MiB line"),
    ],
)
def test_bounded_whatever_the_log(tmp_path: Path, make_output: Callable[[], bytes]) -> None:
    bundle, _ = bundle_for(tmp_path, make_output(), max_bundle_bytes=8 * 1024)
    assert bundle.total_bytes <= 8 * 1024


def test_ruff(tmp_path: Path) -> None:
    module("ruff")
    (tmp_path / "deal.py").write_text("import os\n")
    output = run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--output-format",
            "concise",
            "deal.py",
        ],
        tmp_path,
    )
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "deal.py:1:8: F401")


@SLOW
def test_mypy(tmp_path: Path) -> None:
    module("mypy")
    (tmp_path / "deal.py").write_text('n: int = "one"\n')
    output = run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--no-error-summary",
            "deal.py",
        ],
        tmp_path,
    )
    bundle, log = bundle_for(tmp_path, output)
    assert_found(bundle, log, "deal.py:1: error: Incompatible types in assignment")
