"""Build the labelled failure corpus: run every shape, write ``<case>/log.txt`` and
``<case>/label.json``, plus a padded twin of each with megabytes of ordinary output around
the failure.

    PYTHONPATH=tests python -m corpus.build DIR      (bash scripts/dev.sh corpus DIR)

The shapes run in a thread pool (each is a subprocess, so the threads only wait). A shape
whose tool is not installed here is skipped with its reason printed, never faked.
"""

from __future__ import annotations

import random
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from orchestrator.domain.terminal import plain
from orchestrator.eval.corpus import CaseLabel, write_case
from orchestrator.eval.layers import DEFAULT_TICKET, TICKET_FILE

from corpus import shapes as s
from corpus.shapes import BACK_OFF, CODE_FIX, DEPENDENCY, MECHANICAL, PERSON, Ran, Shape, Workshop

PAD_BYTES = 1024 * 1024  # before and after: a padded case carries 2 MiB of ordinary output
PAD_SEED = 20260412


def _shape(
    id: str, description: str, tool: str, source: str, failure_class: str, warranted: bool,
    actions: tuple[str, ...], root_cause: str, make: s.Callable[[Workshop], Ran], **kw: object,
) -> Shape:  # fmt: skip
    return Shape(id, description, tool, source, failure_class, warranted, actions, root_cause,
                 make, **kw)  # type: ignore[arg-type]  # fmt: skip


# One row per shape; kept as a table (fmt: off) so the labels read side by side.
# fmt: off
SHAPES: tuple[Shape, ...] = (
    _shape("pytest-assert", "pytest: a failing assertion", "pytest", "check", "code", True,
           CODE_FIX, "assert 0 == 4", s.pytest_assert, check="tests"),
    _shape("pytest-assert-colour", "pytest --color=yes: a failing assertion, in colour",
           "pytest", "check", "code", True, CODE_FIX, "E       assert 0 == 4",
           s.pytest_assert_colour, check="tests"),
    _shape("pytest-fixture-error", "pytest: an error in a fixture", "pytest", "check", "code",
           True, CODE_FIX, "RuntimeError: fixture could not open the database",
           s.pytest_fixture_error, check="tests"),
    _shape("pytest-import-error", "pytest: a test module imports a missing module", "pytest",
           "check", "code", True, CODE_FIX,
           "ModuleNotFoundError: No module named 'geometry_helpers_absent'",
           s.pytest_import_error, check="tests"),
    _shape("pytest-collection-error", "pytest: a module-level NameError at collection",
           "pytest", "check", "code", True, CODE_FIX,
           "NameError: name 'build_rows' is not defined", s.pytest_collection_error,
           check="tests"),
    _shape("pytest-syntax-error", "pytest: a syntax error in the code under test", "pytest",
           "check", "code", True, CODE_FIX, "was never closed", s.pytest_syntax_error,
           check="tests"),
    _shape("pytest-exception", "pytest: an exception raised by the code", "pytest", "check",
           "code", True, CODE_FIX, "ZeroDivisionError: division by zero", s.pytest_exception,
           check="tests"),
    _shape("pytest-dict-diff", "pytest -vv: a dict comparison with a diff", "pytest", "check",
           "code", True, CODE_FIX, "'port': 8080", s.pytest_dict_diff, check="tests"),
    _shape("pytest-no-tests", "pytest: no tests collected (exit 5)", "pytest", "check", "code",
           True, CODE_FIX, "no tests ran", s.pytest_no_tests, check="tests"),
    _shape("pytest-xpass-strict", "pytest: a strict xfail passed", "pytest", "check", "code",
           True, CODE_FIX, "[XPASS(strict)] bug 17 not fixed yet", s.pytest_xpass_strict,
           check="tests"),
    _shape("pytest-warning-error", "pytest -W error: a DeprecationWarning as an error",
           "pytest", "check", "code", True, CODE_FIX,
           "DeprecationWarning: old_api() is deprecated", s.pytest_warning_error, check="tests"),
    _shape("pytest-many-failures", "pytest: forty tests, six fail", "pytest", "check", "code",
           True, CODE_FIX, "case 3 is off by one", s.pytest_many_failures, check="tests"),
    # A check that hangs is the code's failure until shown otherwise (the change under test
    # may loop forever): not infrastructure, so the model is asked; retrying is acceptable.
    _shape("pytest-timeout", "pytest hangs; our runner's timeout stops the check", "pytest",
           "check", "code", True, ("retry", "escalate-model", "switch-engine", "split"),
           "# orchestrator: exit 124", s.pytest_timeout, check="tests"),
    _shape("python-warning-error", "python -W error: a UserWarning as an error", "python",
           "check", "code", True, CODE_FIX, "UserWarning: config key `retries` is unused",
           s.python_warning_error, check="smoke"),
    _shape("unittest-failure", "unittest: assertEqual fails", "unittest", "check", "code", True,
           CODE_FIX, "AssertionError: 'hello_world' != 'hello-world'", s.unittest_failure,
           check="tests"),
    _shape("unittest-error", "unittest: a KeyError in a test", "unittest", "check", "code", True,
           CODE_FIX, "KeyError: 'port'", s.unittest_error, check="tests"),
    _shape("doctest-failure", "doctest: float rounding", "doctest", "check", "code", True,
           CODE_FIX, "Failed example:", s.doctest_failure, check="doctest"),
    _shape("script-traceback", "a script's KeyError traceback", "python", "stage", "code", True,
           CODE_FIX, "KeyError: 'database_url'", s.script_traceback),
    _shape("recursion-error", "RecursionError", "python", "stage", "code", True, CODE_FIX,
           "RecursionError: maximum recursion depth exceeded", s.recursion_error),
    _shape("py-compile-error", "python -m py_compile: a syntax error", "py_compile", "check",
           "code", True, CODE_FIX, "SyntaxError", s.py_compile_error, check="compile"),
    _shape("ruff-unused-import", "ruff check: F401", "ruff", "check", "code", True, MECHANICAL,
           "F401 [*] `os` imported but unused", s.ruff_unused_import, check="lint", needs=("module:ruff",)),
    _shape("ruff-unused-import-colour", "ruff check: F401, in colour", "ruff", "check", "code",
           True, MECHANICAL, "F401 [*] `os` imported but unused", s.ruff_unused_import_colour,
           check="lint", needs=("module:ruff",)),
    _shape("ruff-unused-import-github", "ruff check --output-format=github: F401 as an annotation",
           "ruff", "check", "code", True, MECHANICAL, "F401 `os` imported but unused",
           s.ruff_unused_import_github, check="lint", needs=("module:ruff",)),
    _shape("ruff-unused-variable", "ruff check: F841", "ruff", "check", "code", True,
           MECHANICAL, "F841 Local variable `result` is assigned to but never used",
           s.ruff_unused_variable, check="lint", needs=("module:ruff",)),
    _shape("ruff-undefined-name", "ruff check: F821", "ruff", "check", "code", True, CODE_FIX,
           "Undefined name `undefined_thing`", s.ruff_undefined_name, check="lint",
           needs=("module:ruff",)),
    _shape("ruff-format-check", "ruff format --check", "ruff", "check", "code", True,
           MECHANICAL, "1 file would be reformatted", s.ruff_format_check, check="format",
           needs=("module:ruff",)),
    _shape("mypy-return-type", "mypy: an incompatible return value", "mypy", "check", "code",
           True, CODE_FIX, 'Incompatible return value type (got "str", expected "int")',
           s.mypy_return_type, check="types", needs=("module:mypy",)),
    _shape("mypy-return-type-colour", "mypy --color-output: an incompatible return value",
           "mypy", "check", "code", True, CODE_FIX,
           'typed.py:2: error: Incompatible return value type (got "str", expected "int")',
           s.mypy_return_type_colour, check="types", needs=("module:mypy",)),
    _shape("mypy-return-type-json", "mypy -O json: an incompatible return value, one JSON "
           "object a line", "mypy", "check", "code", True, CODE_FIX,
           '"message": "Incompatible return value type (got \\"str\\", expected \\"int\\")"',
           s.mypy_return_type_json, check="types", needs=("module:mypy",)),
    _shape("mypy-missing-import", "mypy: a module with no stubs or implementation", "mypy",
           "check", "code", True, DEPENDENCY,
           'Cannot find implementation or library stub for module named "yaml_loader_absent"',
           s.mypy_missing_import, check="types", needs=("module:mypy",)),
    _shape("mypy-attr", "mypy: an attribute that does not exist", "mypy", "check", "code",
           True, CODE_FIX, '"User" has no attribute "email"', s.mypy_attr, check="types",
           needs=("module:mypy",)),
    _shape("commit-order-squash", "lint-bug-commit-order: fix and test squashed",
           "commit_order", "check", "code", False, ("mechanical-fix",),
           "touches both production code and tests", s.commit_order_squash,
           check="lint-bug-commit-order", playbook_entry="commit-order-squash"),
    _shape("commit-order-two", "lint-bug-commit-order: two violations (no playbook entry)",
           "commit_order", "check", "code", True, ("mechanical-fix", "retry", "abandon-human"),
           "touches both production code and tests", s.commit_order_two,
           check="lint-bug-commit-order"),
    _shape("git-merge-conflict", "git merge: a content conflict", "git", "stage", "code", True,
           ("mechanical-fix", "retry", "abandon-human"),
           "CONFLICT (content): Merge conflict in app.py", s.git_merge_conflict),
    _shape("git-rebase-conflict", "git rebase: a conflict", "git", "stage", "code", True,
           ("mechanical-fix", "retry", "abandon-human"), "could not apply",
           s.git_rebase_conflict),
    _shape("git-apply-failure", "git apply: the patch does not apply", "git", "stage", "code",
           True, CODE_FIX, "patch does not apply", s.git_apply_failure),
    _shape("git-push-rejected", "git push: rejected, the remote has other history", "git",
           "stage", "code", True, ("retry", "mechanical-fix", "abandon-human"), "[rejected]",
           s.git_push_rejected),
    _shape("git-clone-dns", "git clone: the host does not resolve (offline)", "git", "stage",
           "network", False, BACK_OFF, "Could not resolve host", s.git_clone_dns),
    _shape("git-clone-refused", "git clone: connection refused", "git", "stage", "network",
           False, BACK_OFF, "Failed to connect to 127.0.0.1 port 9", s.git_clone_refused),
    _shape("pip-missing-dependency", "pip: no distribution for a requirement (no index)", "pip",
           "check", "code", True, DEPENDENCY,
           "No matching distribution found for fastjsonschema-absent-xyz",
           s.pip_missing_dependency, check="install"),
    _shape("pip-wrong-python", "pip: Requires-Python refuses this interpreter", "pip", "check",
           "code", True, DEPENDENCY, "requires a different Python", s.pip_wrong_python,
           check="install"),
    _shape("pip-network-refused", "pip: the index refuses connections", "pip", "check",
           "network", False, BACK_OFF, "Connection refused", s.pip_network_refused,
           check="install"),
    _shape("urllib-refused", "a script's HTTP call: connection refused", "python", "check",
           "network", False, BACK_OFF, "Connection refused", s.urllib_refused, check="smoke"),
    _shape("gcc-compile-error", "gcc: an undeclared identifier", "gcc", "check", "code", True,
           CODE_FIX, "undeclared (first use in this function)", s.gcc_compile_error, check="build",
           needs=("program:gcc",)),
    _shape("gcc-compile-error-colour", "gcc -fdiagnostics-color=always: an undeclared identifier",
           "gcc", "check", "code", True, CODE_FIX,
           "main.c:2:12: error: ‘undeclared_total’ undeclared (first use in this function)",
           s.gcc_compile_error_colour, check="build", needs=("program:gcc",)),
    _shape("gcc-link-error", "gcc: an undefined reference at link time", "gcc", "check",
           "code", True, CODE_FIX, "undefined reference to `checksum'", s.gcc_link_error,
           check="build", needs=("program:gcc",)),
    _shape("make-missing-rule", "make: no rule to make a target", "make", "check", "code", True,
           CODE_FIX, "No rule to make target 'main.o'", s.make_missing_rule, check="build",
           needs=("program:make",)),
    _shape("make-recipe-failure", "make: a recipe exits non-zero", "make", "check", "code",
           True, CODE_FIX, "integration suite: 3 failed", s.make_recipe_failure, check="build",
           needs=("program:make",)),
    _shape("enospc-python", "a write to a full disk (Python, /dev/full)", "python", "check",
           "resource_exhausted", False, PERSON, "No space left on device", s.enospc_python,
           check="build"),
    _shape("enospc-dd", "dd to a full disk (/dev/full)", "dd", "stage", "resource_exhausted",
           False, PERSON, "No space left on device", s.enospc_dd, needs=("program:dd",)),
    _shape("memory-error", "MemoryError past RLIMIT_AS", "python", "check",
           "resource_exhausted", False, PERSON, "MemoryError", s.memory_error, check="tests"),
    _shape("oom-kill", "a process SIGKILLed after exceeding RLIMIT_AS (exit 137)", "bash",
           "check", "resource_exhausted", False, PERSON, "Killed",
           s.oom_kill, check="tests", needs=("program:bash",),
           notes="SIGKILL sent on MemoryError under RLIMIT_AS; bash reports 137"),
    _shape("check-command-not-found", "a check's shell cannot find its program (127)", "bash",
           "check", "config_error", False, PERSON, "eslint-absent-xyz: command not found",
           s.missing_program_in_check, check="lint", needs=("program:bash",)),
    _shape("executable-not-found", "the stage's program is not installed", "runner", "stage",
           "config_error", False, PERSON, "executable not found: golangci-lint-absent-xyz",
           s.executable_not_found),
    _shape("marker-check-rate-limited", "a check prints ::failure-class::rate_limited",
           "python", "check", "rate_limited", False, BACK_OFF, "429 Too Many Requests",
           s.failure_class_marker_check, check="coverage-upload"),
    _shape("marker-stage-outage", "a stage prints ::failure-class::outage", "python", "stage",
           "outage", False, BACK_OFF, "503 Service Unavailable", s.failure_class_marker_stage),
    _shape("claude-rate-limited", "Claude Code: API Error 429", "claude-code", "engine",
           "rate_limited", False, BACK_OFF, "rate_limit_error", s._engine("claude-code",
           "rate_limited"), engine="claude-code"),
    _shape("claude-auth", "Claude Code: invalid API key", "claude-code", "engine", "auth_error",
           False, PERSON, "Invalid API key", s._engine("claude-code", "auth"),
           engine="claude-code"),
    _shape("claude-max-turns", "Claude Code: ran out of turns", "claude-code", "engine", "code",
           True, ("retry", "escalate-model", "switch-engine", "split"), "error_max_turns",
           s._engine("claude-code", "error"), engine="claude-code"),
    _shape("codex-rate-limited", "Codex: retry limit on 429", "codex", "engine", "rate_limited",
           False, BACK_OFF, "429 Too Many Requests", s._engine("codex", "rate_limited"),
           engine="codex"),
    _shape("codex-auth", "Codex: 401 Unauthorized", "codex", "engine", "auth_error", False,
           PERSON, "401 Unauthorized", s._engine("codex", "auth"), engine="codex"),
    _shape("aider-rate-limited", "aider: litellm.RateLimitError", "aider", "engine",
           "rate_limited", False, BACK_OFF, "RateLimitError", s._engine("aider",
           "rate_limited"), engine="aider"),
    _shape("aider-auth", "aider: litellm.AuthenticationError", "aider", "engine", "auth_error",
           False, PERSON, "AuthenticationError", s._engine("aider", "auth"), engine="aider"),
    _shape("claude-hang", "Claude Code hangs; our timeout stops it", "claude-code", "engine",
           "timeout", False, BACK_OFF, "# orchestrator: exit 124",
           s._engine("claude-code", "hang", timeout_s=1.5), engine="claude-code"),
)
# fmt: on


def padding(seed: int = PAD_SEED, size: int = PAD_BYTES) -> tuple[bytes, bytes]:
    """Ordinary output before and after a failure: a seeded pytest-like PASSED stream, then
    a coverage-style table. Deterministic: the same seed gives the same bytes."""
    rng = random.Random(seed)
    before: list[str] = []
    total = 0
    n = 0
    while total < size:
        n += 1
        line = (
            f"tests/unit/test_module_{rng.randrange(400):03d}.py::test_case_{rng.randrange(90)}"
            f"[param-{rng.randrange(10_000)}] PASSED{' ' * rng.randrange(1, 8)}"
            f"[{min(99, n * 100 // 12_000):3d}%]\n"
        )
        before.append(line)
        total += len(line)
    after: list[str] = []
    total = 0
    while total < size:
        line = (
            f"src/pkg/module_{rng.randrange(400):03d}.py{' ' * 8}{rng.randrange(20, 400):5d}"
            f"{rng.randrange(0, 20):6d}{rng.randrange(60, 100):6d}%\n"
        )
        after.append(line)
        total += len(line)
    return "".join(before).encode(), "".join(after).encode()


def _label(shape: Shape, ran: Ran, *, padded: bool) -> CaseLabel:
    return CaseLabel(
        id=shape.id + ("-padded" if padded else ""),
        description=shape.description + (" (padded)" if padded else ""),
        tool=shape.tool,
        source=shape.source,  # type: ignore[arg-type]
        check=shape.check,
        engine=shape.engine,
        exit_code=ran.exit_code,
        timed_out=ran.timed_out,
        start_error=ran.error,
        failure_class=shape.failure_class,
        model_call_warranted=shape.model_call_warranted,
        acceptable_actions=shape.acceptable_actions,
        playbook_entry=shape.playbook_entry,
        root_cause=shape.root_cause,
        padded=padded,
        notes=shape.notes,
    )


def missing_need(shape: Shape) -> str | None:
    for need in shape.needs:
        kind, _, name = need.partition(":")
        if kind == "program" and not s.which(name):
            return f"{name} is not installed on this machine"
        if kind == "module" and not s.python_module(name):
            return f"python module {name} is not installed in this environment"
    return None


def _pad(log: bytes, before: bytes, after: bytes, engine: bool) -> bytes:
    # The runner's header lines stay first; an engine prints nothing after its final event,
    # so an engine log is padded before the failure only.
    lines = log.split(b"\n")
    head = b"\n".join(lines[:2]) + b"\n"
    body = b"\n".join(lines[2:])
    if engine:
        return head + before + body
    footer_at = body.rfind(b"# orchestrator: exit ")
    if footer_at < 0:
        return head + before + body + after
    return head + before + body[:footer_at] + after + body[footer_at:]


def build(
    dest: Path, *, workers: int = 4, pad_bytes: int = PAD_BYTES, only: tuple[str, ...] = ()
) -> list[str]:
    """Run every shape (or those ``only`` names), write its case and its padded twin under
    ``dest``. Returns what was skipped (one line each). Raises if a root-cause line is not
    in the log it labels."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / TICKET_FILE).write_text(DEFAULT_TICKET)
    before, after = padding(size=pad_bytes)
    skipped: list[str] = []
    runnable: list[Shape] = []
    for shape in [shape for shape in SHAPES if not only or shape.id in only]:
        why = missing_need(shape)
        if why is None:
            runnable.append(shape)
        else:
            skipped.append(f"{shape.id}: skipped, {why}")
    with tempfile.TemporaryDirectory(prefix="corpus-work-") as tmp:
        ws = Workshop(Path(tmp))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(lambda shape: (shape, shape.make(ws)), runnable))
    problems = []
    for shape, ran in results:
        text = ran.log.decode("utf-8", "replace")
        # Past the runner's header: the argv line would match a cause it merely names.
        output = text.split("\n", 2)[2] if text.count("\n") >= 2 else ""
        # aider exits 0 even when every call failed (as the real one does).
        succeeded = ran.exit_code == 0 and shape.source != "engine"
        # The root-cause line as a reader sees it: a coloured log's escapes do not count.
        if shape.root_cause not in plain(output) or succeeded:
            problems.append(
                f"{shape.id}: exit {ran.exit_code}; the root-cause line {shape.root_cause!r} "
                f"must be in the failed tool's output:\n{text[-2000:]}"
            )
            continue
        write_case(dest, _label(shape, ran, padded=False), ran.log)
        padded_log = _pad(ran.log, before, after, shape.source == "engine")
        write_case(dest, _label(shape, ran, padded=True), padded_log)
    if problems:
        raise AssertionError("\n\n".join(problems))
    return skipped


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m corpus.build DIR", file=sys.stderr)
        return 2
    dest = Path(argv[0])
    if dest.exists() and any(dest.iterdir()):
        print(f"{dest} is not empty: give a new or empty directory", file=sys.stderr)
        return 2
    for line in build(dest):
        print(line)
    cases = sum(1 for _ in dest.glob("*/label.json"))
    print(f"corpus: {cases} cases written to {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
