"""The failure shapes of the labelled corpus: each one RUNS a real tool on a tiny project.

Every shape is a function that builds a small project under its own work directory and
runs the tool through ``orchestrator.execution.runner.run_process`` — the very function a
stage or a check runs through — so the log it leaves is byte for byte what a failing
stage or check would leave (the runner's header and footer lines included). Nothing here
types a tool's output by hand; the labels (class, whether a model call is warranted, the
acceptable actions, the root-cause line) are ours, written from what the tool is known to
print, and the corpus builder checks that each root-cause line really is in the log.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.execution import runner
from orchestrator.execution.process import ProcessRequest

FAKES = Path(__file__).resolve().parent.parent / "fakes"
REPO = Path(__file__).resolve().parents[2]

# The acceptable actions, by what a sensible decision looks like.
CODE_FIX = ("retry", "escalate-model", "switch-engine", "mechanical-fix", "split")
MECHANICAL = ("mechanical-fix", "retry", "escalate-model", "switch-engine")
PERSON = ("abandon-human",)
BACK_OFF = ("retry",)
DEPENDENCY = ("mechanical-fix", "retry", "escalate-model", "abandon-human")


@dataclass(frozen=True)
class Ran:
    """What one tool run left: the log as the runner wrote it, and how it ended."""

    log: bytes
    exit_code: int
    timed_out: bool
    error: str | None


@dataclass(frozen=True)
class Shape:
    id: str
    description: str
    tool: str
    source: str  # "check" | "stage" | "engine"
    failure_class: str
    model_call_warranted: bool
    acceptable_actions: tuple[str, ...]
    root_cause: str
    make: Callable[[Workshop], Ran]
    check: str | None = None
    engine: str | None = None
    playbook_entry: str | None = None
    # Why a shape may be skipped on this machine (a tool that is not installed): checked
    # before running, so the corpus says what it could not make instead of failing.
    needs: tuple[str, ...] = ()
    notes: str = ""


class Workshop:
    """A work directory per shape and the one way to run a tool in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "_home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.mypy_cache_lock = threading.Lock()

    def project(self, name: str, files: dict[str, str]) -> Path:
        where = self.root / name
        for rel, text in files.items():
            path = where / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text).lstrip("\n"))
        where.mkdir(parents=True, exist_ok=True)
        return where

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            # A project's pytest as its own CI has it: none of the plugins installed for
            # this suite (hypothesis alone is 2 s of CPU at each start, 12 starts a build).
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
            "PIP_CONFIG_FILE": os.devnull,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Corpus",
            "GIT_AUTHOR_EMAIL": "corpus@example.invalid",
            "GIT_COMMITTER_NAME": "Corpus",
            "GIT_COMMITTER_EMAIL": "corpus@example.invalid",
            "NO_COLOR": "1",
        }
        env.update(extra or {})
        return env

    def run(
        self,
        argv: tuple[str, ...],
        cwd: Path,
        *,
        timeout_s: float = 60.0,
        env: dict[str, str] | None = None,
        log_name: str = "out.log",
        stdin: Path | None = None,
    ) -> Ran:
        log = cwd / ".." / f"{cwd.name}-{log_name}"
        outcome = runner.run_process(
            ProcessRequest(
                argv, cwd=cwd, env=self.env(env), log_path=log, timeout_s=timeout_s,
                kill_after_s=1.0, stdin_path=stdin,
            )
        )  # fmt: skip
        return Ran(log.read_bytes(), outcome.exit_code, outcome.timed_out, outcome.error)

    def quiet(self, argv: tuple[str, ...], cwd: Path) -> None:
        """A set-up step (git init, a commit): it must succeed; its log is not the case's."""
        ran = self.run(argv, cwd, log_name="setup.log")
        if ran.exit_code != 0:
            raise RuntimeError(f"set-up step {argv} failed:\n{ran.log.decode(errors='replace')}")

    def git(self, cwd: Path, *args: str) -> None:
        self.quiet(("git", *args), cwd)


PY = sys.executable
# What a CI system that wants colour sets (NO_COLOR empty is NO_COLOR unset).
COLOUR = {"NO_COLOR": "", "FORCE_COLOR": "1", "CLICOLOR_FORCE": "1"}


def _pytest(ws: Workshop, name: str, files: dict[str, str], *args: str, **kw: float) -> Ran:
    where = ws.project(name, {"pytest.ini": "[pytest]\n", **files})
    argv = (PY, "-m", "pytest", "-p", "no:cacheprovider", *args)
    return ws.run(argv, where, timeout_s=kw.get("timeout_s", 60.0))


# ---- python tests -------------------------------------------------------------------------


def pytest_assert(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-assert", {
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    })  # fmt: skip


def pytest_assert_colour(ws: Workshop) -> Ran:
    # As a CI system that asks for colour leaves it: the lines carry escape sequences.
    where = ws.project("pytest-assert-colour", {
        "pytest.ini": "[pytest]\n",
        "calc.py": "def add(a, b):\n    return a - b\n",
        "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
    })  # fmt: skip
    argv = (PY, "-m", "pytest", "-p", "no:cacheprovider", "--color=yes")
    return ws.run(argv, where, env=COLOUR)


def pytest_fixture_error(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-fixture", {
        "test_db.py": """
            import pytest

            @pytest.fixture
            def db():
                raise RuntimeError("fixture could not open the database: users.sqlite")

            def test_users(db):
                assert db
        """,
    })  # fmt: skip


def pytest_import_error(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-import", {
        "test_geo.py": "import geometry_helpers_absent\n\ndef test_area():\n    assert True\n",
    })  # fmt: skip


def pytest_collection_error(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-collect", {
        "test_table.py": "ROWS = build_rows()\n\ndef test_rows():\n    assert ROWS\n",
    })  # fmt: skip


def pytest_syntax_error(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-syntax", {
        "parser.py": "def parse(text):\n    return split(text\n",
        "test_parser.py": "from parser import parse\n\ndef test_parse():\n    assert parse('a')\n",
    })  # fmt: skip


def pytest_exception(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-exception", {
        "stats.py": "def mean(xs):\n    return sum(xs) / len(xs)\n",
        "test_stats.py": "from stats import mean\n\ndef test_empty():\n    assert mean([]) == 0\n",
    })  # fmt: skip


def pytest_dict_diff(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-dict", {
        "test_config.py": """
            def load():
                return {"name": "svc", "port": 8080, "debug": True, "workers": 4}

            def test_defaults():
                assert load() == {"name": "svc", "port": 8081, "debug": True, "workers": 4}
        """,
    }, "-vv")  # fmt: skip


def pytest_no_tests(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-empty", {"helpers.py": "X = 1\n"})


def pytest_xpass_strict(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-xpass", {
        "test_known.py": """
            import pytest

            @pytest.mark.xfail(strict=True, reason="bug 17 not fixed yet")
            def test_bug_17():
                assert 1 + 1 == 2
        """,
    })  # fmt: skip


def pytest_warning_error(ws: Workshop) -> Ran:
    return _pytest(ws, "pytest-warning", {
        "legacy.py": """
            import warnings

            def old_api():
                warnings.warn("old_api() is deprecated; use new_api()", DeprecationWarning)
                return 1
        """,
        "test_legacy.py": "from legacy import old_api\n\ndef test_old():\n    assert old_api() == 1\n",
    }, "-W", "error::DeprecationWarning")  # fmt: skip


def pytest_many_failures(ws: Workshop) -> Ran:
    tests = "\n".join(
        f"def test_case_{i}():\n    assert {i} % 7 != 3, 'case {i} is off by one'\n"
        for i in range(40)
    )
    return _pytest(ws, "pytest-many", {"test_many.py": tests}, "-rf")


def pytest_timeout(ws: Workshop) -> Ran:
    # Our runner's timeout stops the test run (the shape of a hung or flaky test).
    return _pytest(ws, "pytest-hang", {
        "test_slow.py": "import time\n\ndef test_waits():\n    time.sleep(30)\n",
    }, timeout_s=1.5)  # fmt: skip


def python_warning_error(ws: Workshop) -> Ran:
    where = ws.project("py-warning", {
        "job.py": "import warnings\nwarnings.warn('config key `retries` is unused')\n",
    })  # fmt: skip
    return ws.run((PY, "-W", "error", "job.py"), where)


def unittest_failure(ws: Workshop) -> Ran:
    where = ws.project("unittest-fail", {
        "test_slug.py": """
            import unittest

            def slug(s):
                return s.lower().replace(" ", "_")

            class SlugTest(unittest.TestCase):
                def test_slug(self):
                    self.assertEqual(slug("Hello World"), "hello-world")
        """,
    })  # fmt: skip
    return ws.run((PY, "-m", "unittest", "-v"), where)


def unittest_error(ws: Workshop) -> Ran:
    where = ws.project("unittest-error", {
        "test_cfg.py": """
            import unittest

            class CfgTest(unittest.TestCase):
                def test_port(self):
                    cfg = {"host": "localhost"}
                    self.assertEqual(cfg["port"], 80)
        """,
    })  # fmt: skip
    return ws.run((PY, "-m", "unittest"), where)


def doctest_failure(ws: Workshop) -> Ran:
    where = ws.project("doctest", {
        "money.py": '''
            def cents(amount):
                """
                >>> cents(0.29)
                29
                """
                return int(amount * 100)
        ''',
    })  # fmt: skip
    return ws.run((PY, "-m", "doctest", "-v", "money.py"), where)


def script_traceback(ws: Workshop) -> Ran:
    where = ws.project("script-keyerror", {
        "migrate.py": "settings = {'db': 'x'}\nprint('migrating')\nprint(settings['database_url'])\n",
    })  # fmt: skip
    return ws.run((PY, "migrate.py"), where)


def recursion_error(ws: Workshop) -> Ran:
    where = ws.project("recursion", {
        "walk.py": "def walk(n):\n    return walk(n + 1)\n\nwalk(0)\n",
    })  # fmt: skip
    return ws.run((PY, "walk.py"), where)


def py_compile_error(ws: Workshop) -> Ran:
    where = ws.project("py-compile", {"report.py": "def total(:\n    pass\n"})
    return ws.run((PY, "-m", "py_compile", "report.py"), where)


# ---- lint, types, formatting ----------------------------------------------------------------


def _ruff(
    ws: Workshop, name: str, source: str, *args: str, env: dict[str, str] | None = None
) -> Ran:
    where = ws.project(name, {"pkg/mod.py": source})
    return ws.run((PY, "-m", "ruff", *args, "--no-cache", "pkg"), where, env=env)


def ruff_unused_import(ws: Workshop) -> Ran:
    return _ruff(ws, "ruff-f401", "import os\n\n\ndef f():\n    return 1\n", "check")


def ruff_unused_import_colour(ws: Workshop) -> Ran:
    return _ruff(
        ws, "ruff-f401-colour", "import os\n\n\ndef f():\n    return 1\n", "check", env=COLOUR
    )


def ruff_unused_import_github(ws: Workshop) -> Ran:
    # As a workflow asks for it: one GitHub Actions annotation per finding.
    return _ruff(
        ws, "ruff-f401-github", "import os\n\n\ndef f():\n    return 1\n", "check",
        "--output-format=github",
    )  # fmt: skip


def ruff_unused_variable(ws: Workshop) -> Ran:
    return _ruff(
        ws, "ruff-f841", "def f():\n    result = compute()\n    return 1\n",
        "check", "--select", "F841",
    )  # fmt: skip


def ruff_undefined_name(ws: Workshop) -> Ran:
    return _ruff(ws, "ruff-f821", "def f():\n    return undefined_thing + 1\n", "check")


def ruff_format_check(ws: Workshop) -> Ran:
    return _ruff(ws, "ruff-format", "def f( a,b ):\n  return {'a':a,'b':b}\n", "format", "--check")


def _mypy_standard_library(ws: Workshop) -> Path:
    """A mypy cache of the standard library's stubs (--strict), made once per build: each
    mypy shape starts from a copy of it (1.3 s of CPU a run cold, 0.3 s warm). A cache
    changes how long mypy takes, not what it prints."""
    cache = ws.root / "_mypy_cache-stdlib"
    with ws.mypy_cache_lock:
        if not cache.is_dir():
            where = ws.project("mypy-stdlib", {"clean.py": "X: int = 1\n"})
            warm = ws.root / "_mypy_cache-stdlib.partial"
            ws.quiet((PY, "-m", "mypy", "--strict", "--cache-dir", str(warm), "clean.py"), where)
            warm.rename(cache)
    return cache


def _mypy(ws: Workshop, name: str, source: str, *, colour: bool = False, json: bool = False) -> Ran:
    where = ws.project(name, {"typed.py": source})
    # One cache per run: the shapes run in parallel, and mypy's cache is not for sharing.
    cache = ws.root / f"_mypy_cache-{name}"
    shutil.copytree(_mypy_standard_library(ws), cache)
    return ws.run(
        (PY, "-m", "mypy", "--strict", "--cache-dir", str(cache),
         "--color-output" if colour else "--no-color-output",
         *(("-O", "json") if json else ()), "typed.py"),
        where,
        env={**COLOUR, "MYPY_FORCE_COLOR": "1"} if colour else None,
    )  # fmt: skip


def mypy_return_type(ws: Workshop) -> Ran:
    return _mypy(ws, "mypy-return", "def count(s: str) -> int:\n    return s.strip()\n")


def mypy_return_type_colour(ws: Workshop) -> Ran:
    source = "def count(s: str) -> int:\n    return s.strip()\n"
    return _mypy(ws, "mypy-return-colour", source, colour=True)


def mypy_return_type_json(ws: Workshop) -> Ran:
    source = "def count(s: str) -> int:\n    return s.strip()\n"
    return _mypy(ws, "mypy-return-json", source, json=True)


def mypy_missing_import(ws: Workshop) -> Ran:
    return _mypy(ws, "mypy-import", "import yaml_loader_absent\n\nX: int = 1\n")


def mypy_attr(ws: Workshop) -> Ran:
    return _mypy(
        ws,
        "mypy-attr",
        "class User:\n    name: str = ''\n\n\ndef f(u: User) -> str:\n    return u.email\n",
    )


# ---- the project's own check, git ----------------------------------------------------------


def _commit_order_repo(ws: Workshop, name: str, squashed: int) -> Path:
    where = ws.project(name, {"app/core.py": "X = 1\n", "tests/test_core.py": "def test(): pass\n"})
    ws.git(where, "init", "-q", "-b", "main")
    ws.git(where, "add", "-A")
    ws.git(where, "commit", "-q", "-m", "initial")
    ws.git(where, "update-ref", "refs/remotes/origin/main", "HEAD")
    for i in range(squashed):
        (where / "app" / "core.py").write_text(f"X = {i + 2}\n")
        (where / "tests" / "test_core.py").write_text(f"def test(): assert {i + 2}\n")
        ws.git(where, "add", "-A")
        ws.git(where, "commit", "-q", "-m", f"fix: off-by-one in core ({i})")
    return where


def commit_order_squash(ws: Workshop) -> Ran:
    where = _commit_order_repo(ws, "commit-order", 1)
    env = {"PYTHONPATH": str(REPO)}
    argv = (PY, "-m", "orchestrator.stages.checks.commit_order", "--kind", "bug-fix")
    return ws.run(argv, where, env=env)


def commit_order_two(ws: Workshop) -> Ran:
    where = _commit_order_repo(ws, "commit-order-2", 2)
    env = {"PYTHONPATH": str(REPO)}
    argv = (PY, "-m", "orchestrator.stages.checks.commit_order", "--kind", "bug-fix")
    return ws.run(argv, where, env=env)


def _two_branches(ws: Workshop, name: str) -> Path:
    where = ws.project(name, {"app.py": "greeting = 'hello'\n"})
    ws.git(where, "init", "-q", "-b", "main")
    ws.git(where, "add", "-A")
    ws.git(where, "commit", "-q", "-m", "initial")
    ws.git(where, "checkout", "-q", "-b", "feature")
    (where / "app.py").write_text("greeting = 'hi there'\n")
    ws.git(where, "commit", "-q", "-am", "feature greeting")
    ws.git(where, "checkout", "-q", "main")
    (where / "app.py").write_text("greeting = 'good morning'\n")
    ws.git(where, "commit", "-q", "-am", "main greeting")
    return where


def git_merge_conflict(ws: Workshop) -> Ran:
    where = _two_branches(ws, "git-merge")
    return ws.run(("git", "merge", "--no-edit", "feature"), where)


def git_rebase_conflict(ws: Workshop) -> Ran:
    where = _two_branches(ws, "git-rebase")
    ws.git(where, "checkout", "-q", "feature")
    return ws.run(("git", "rebase", "main"), where)


def git_apply_failure(ws: Workshop) -> Ran:
    where = ws.project("git-apply", {
        "app.py": "a = 1\nb = 2\n",
        "fix.patch": """
            --- a/app.py
            +++ b/app.py
            @@ -1,2 +1,2 @@
             a = 10
            -b = 20
            +b = 30
        """,
    })  # fmt: skip
    ws.git(where, "init", "-q", "-b", "main")
    return ws.run(("git", "apply", "fix.patch"), where)


def git_push_rejected(ws: Workshop) -> Ran:
    remote = ws.root / "push-remote.git"
    ws.quiet(("git", "init", "-q", "--bare", "-b", "main", str(remote)), ws.root)
    first = ws.project("push-a", {"a.txt": "1\n"})
    ws.git(first, "init", "-q", "-b", "main")
    ws.git(first, "add", "-A")
    ws.git(first, "commit", "-q", "-m", "one")
    ws.git(first, "push", "-q", str(remote), "main")
    second = ws.project("push-b", {"b.txt": "2\n"})
    ws.git(second, "init", "-q", "-b", "main")
    ws.git(second, "add", "-A")
    ws.git(second, "commit", "-q", "-m", "other history")
    return ws.run(("git", "push", str(remote), "main"), second)


def git_clone_dns(ws: Workshop) -> Ran:
    where = ws.project("git-dns", {})
    url = "https://git.corpus-host.invalid/team/service.git"
    return ws.run(("git", "clone", "--depth", "1", url, "svc"), where, timeout_s=30.0)


def git_clone_refused(ws: Workshop) -> Ran:
    where = ws.project("git-refused", {})
    return ws.run(("git", "clone", "http://127.0.0.1:9/team/service.git", "svc"), where)


# ---- pip ---------------------------------------------------------------------------------


def pip_missing_dependency(ws: Workshop) -> Ran:
    where = ws.project("pip-missing", {"requirements.txt": "fastjsonschema-absent-xyz==2.1\n"})
    wheels = where / "wheels"
    wheels.mkdir()
    return ws.run(
        (PY, "-m", "pip", "install", "--no-index", "--find-links", str(wheels), "--dry-run",
         "-r", "requirements.txt"),
        where,
    )  # fmt: skip


def _wheel(where: Path, requires_python: str) -> Path:
    wheel = where / "oldlib-1.0-py3-none-any.whl"
    info = "oldlib-1.0.dist-info"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("oldlib/__init__.py", "")
        zf.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: oldlib\nVersion: 1.0\nRequires-Python: {requires_python}\n",
        )
        zf.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: corpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        zf.writestr(f"{info}/RECORD", "")
    return wheel


def pip_wrong_python(ws: Workshop) -> Ran:
    where = ws.project("pip-python", {})
    wheel = _wheel(where, ">=3.99")
    return ws.run(
        (PY, "-m", "pip", "install", "--no-index", "--no-deps", "--dry-run", str(wheel)), where
    )


def pip_network_refused(ws: Workshop) -> Ran:
    where = ws.project("pip-network", {})
    return ws.run(
        (PY, "-m", "pip", "install", "--index-url", "http://127.0.0.1:9/simple", "--retries",
         "1", "--timeout", "3", "--dry-run", "requests-absent-xyz"),
        where,
    )  # fmt: skip


def urllib_refused(ws: Workshop) -> Ran:
    where = ws.project("urllib-refused", {
        "fetch.py": "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:9/health', timeout=5)\n",
    })  # fmt: skip
    return ws.run((PY, "fetch.py"), where)


# ---- C, make ------------------------------------------------------------------------------


def gcc_compile_error(ws: Workshop) -> Ran:
    where = ws.project("gcc-compile", {
        "main.c": "int main(void) {\n    return undeclared_total + 1;\n}\n",
    })  # fmt: skip
    return ws.run(("gcc", "-fdiagnostics-color=never", "-c", "main.c"), where)


def gcc_compile_error_colour(ws: Workshop) -> Ran:
    where = ws.project("gcc-compile-colour", {
        "main.c": "int main(void) {\n    return undeclared_total + 1;\n}\n",
    })  # fmt: skip
    return ws.run(("gcc", "-fdiagnostics-color=always", "-c", "main.c"), where)


def gcc_link_error(ws: Workshop) -> Ran:
    where = ws.project("gcc-link", {
        "main.c": "int checksum(int);\nint main(void) {\n    return checksum(3);\n}\n",
    })  # fmt: skip
    return ws.run(("gcc", "-fdiagnostics-color=never", "main.c", "-o", "main"), where)


def make_missing_rule(ws: Workshop) -> Ran:
    where = ws.project("make-rule", {"Makefile": "app: main.o util.o\n\tcc -o app main.o util.o\n"})
    return ws.run(("make",), where)


def make_recipe_failure(ws: Workshop) -> Ran:
    where = ws.project("make-recipe", {
        "Makefile": "test:\n\t@echo running tests\n\t@sh -c 'echo \"integration suite: 3 failed\"; exit 3'\n",
    })  # fmt: skip
    return ws.run(("make", "test"), where)


# ---- resources, the machine ----------------------------------------------------------------


def enospc_python(ws: Workshop) -> Ran:
    where = ws.project("enospc-py", {
        "dump.py": "with open('/dev/full', 'w') as fh:\n    fh.write('x' * 65536)\n",
    })  # fmt: skip
    return ws.run((PY, "dump.py"), where)


def enospc_dd(ws: Workshop) -> Ran:
    where = ws.project("enospc-dd", {})
    return ws.run(("dd", "if=/dev/zero", "of=/dev/full", "bs=4096", "count=4"), where)


_ALLOC = (
    "import resource, sys\n"
    "resource.setrlimit(resource.RLIMIT_AS, (512 * 1024 * 1024, 512 * 1024 * 1024))\n"
    "print('loading the embeddings', flush=True)\n"
    "blocks = [bytearray(64 * 1024 * 1024) for _ in range(32)]\n"
)


def memory_error(ws: Workshop) -> Ran:
    where = ws.project("oom-memoryerror", {"load.py": _ALLOC})
    return ws.run((PY, "load.py"), where)


def oom_kill(ws: Workshop) -> Ran:
    # The kernel's OOM killer cannot be summoned safely on a shared machine; what it leaves
    # is a process dead of SIGKILL after running out of memory. Here the process exceeds
    # its RLIMIT_AS and the memory watchdog (the process itself, on MemoryError) sends
    # SIGKILL, under a shell that reports it as an OOM-killed job shows: "Killed", 137.
    script = (
        _ALLOC.replace("blocks = ", "import os, signal\ntry:\n    blocks = ")
        + "except MemoryError:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    where = ws.project("oom-kill", {"load.py": script})
    return ws.run(("bash", "-c", f"{PY} load.py; exit $?"), where)


def missing_program_in_check(ws: Workshop) -> Ran:
    where = ws.project("check-cmd-missing", {})
    return ws.run(("bash", "-c", "echo linting; eslint-absent-xyz --max-warnings 0 src"), where)


def executable_not_found(ws: Workshop) -> Ran:
    where = ws.project("exec-missing", {})
    return ws.run(("golangci-lint-absent-xyz", "run"), where)


def failure_class_marker_check(ws: Workshop) -> Ran:
    where = ws.project("marker-check", {
        "check.py": (
            "import sys\nprint('uploading coverage report')\n"
            "print('upstream answered 429 Too Many Requests')\n"
            "print('::failure-class::rate_limited')\nsys.exit(1)\n"
        ),
    })  # fmt: skip
    return ws.run((PY, "check.py"), where)


def failure_class_marker_stage(ws: Workshop) -> Ran:
    where = ws.project("marker-stage", {
        "open_pr.py": (
            "import sys\nprint('opening the pull request')\n"
            "print('forge answered 503 Service Unavailable')\n"
            "print('::failure-class::outage')\nsys.exit(1)\n"
        ),
    })  # fmt: skip
    return ws.run((PY, "open_pr.py"), where)


# ---- engines (the fakes print the real CLIs' output formats) -------------------------------

_ENGINE_ARGV = {
    "claude-code": ("claude", ("-p", "--output-format", "stream-json", "--verbose")),
    "codex": ("codex", ("exec", "--json", "-")),
    "aider": ("aider", ("--message-file", "prompt.txt", "--yes-always", "--no-auto-commits")),
}


def _engine(engine: str, mode: str, timeout_s: float = 30.0) -> Callable[[Workshop], Ran]:
    def make(ws: Workshop) -> Ran:
        fake, args = _ENGINE_ARGV[engine]
        where = ws.project(f"engine-{engine}-{mode}", {"prompt.txt": "Fix the bug.\n"})
        argv = (PY, str(FAKES / fake), *args)
        # claude and codex read the prompt on stdin (as their adapters run them).
        stdin = where / "prompt.txt" if engine != "aider" else None
        env = {"FAKE_ENGINE_MODE": mode}
        return ws.run(argv, where, timeout_s=timeout_s, env=env, stdin=stdin)

    return make


def which(program: str) -> bool:
    return shutil.which(program) is not None


def python_module(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None
