"""Where things may happen, proven from the syntax tree of every module (not by grepping).

* Nothing under ``orchestrator/recovery/`` imports the runner, the substrate,
  ``subprocess``, ``pty``, or calls ``os.system`` / ``os.exec*`` / ``os.spawn*`` /
  ``os.posix_spawn*`` / ``os.fork*``: the decision never executes anything.
* The recovery modules may use the action registry's declarations, never an action's
  ``apply``: importing all of them loads no execution, app, storage or report module.
* Only ``orchestrator/execution/runner.py`` starts processes, and only the executor
  (``orchestrator/execution/executor.py``) calls it to: everything else holds an Executor.
  The runner's other half, ``orchestrator/execution/reaper.py``, is the program the runner
  runs by path to supervise each stage (it forks and execs the stage): it is started by the
  runner alone, nothing imports it, and it imports nothing of ours. The sandbox's launcher,
  ``orchestrator/execution/sandbox_launch.py``, is the same kind of program: run by path as
  the first step of a sandboxed command, it sets limits and execs bwrap, nothing else.
  The egress bridge, ``orchestrator/execution/egress_bridge.py``, is one too: run by path
  inside the sandbox, it forks the helper that passes connections to the egress proxy
  and execs the command it was given. The sandbox's init,
  ``orchestrator/execution/sandbox_init.py``, is one too: run by path as the sandbox's
  PID 1, it forks and execs the command it was given and reports its wait status.
* Only ``orchestrator/recovery/anthropic_gateway.py`` imports the model SDK.
* Only ``orchestrator/reading/prefilter.py`` imports RE2 (an optional speed-up).
* Only the fleet's Redis stores (``orchestrator/storage/redis/``) import the redis client,
  only the Celery executor (``orchestrator/batch/celery/``) imports the queue (Celery,
  kombu, billiard), and each only inside functions: ``--help``, ``run`` and the local
  ``batch`` never load them, and work where they are not installed.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from conftest import ROOT, bash_stage, subprocess_env, write_config, write_ticket

PACKAGE = ROOT / "orchestrator"
PROCESS_MODULES = {"subprocess", "pty", "multiprocessing", "asyncio.subprocess"}
OS_MODULES = ("os", "posix")
OS_PROCESS_CALLS = ("system", "popen", "exec", "spawn", "posix_spawn", "fork", "forkpty")
SDK_MODULES = {"anthropic", "httpx2", "httpx"}
# GitPython starts git itself. It is used by the demo's fixture builder (developer
# tooling), never by the orchestrator's own run path.
GITPYTHON_ALLOWED = {"orchestrator/demo/run.py"}
RUNNER = "orchestrator/execution/runner.py"
REAPER = "orchestrator/execution/reaper.py"
LAUNCHER = "orchestrator/execution/sandbox_launch.py"
BRIDGE = "orchestrator/execution/egress_bridge.py"
SANDBOX_INIT = "orchestrator/execution/sandbox_init.py"
# Stage scripts and checks are the programs the runner starts (``python -m
# orchestrator.stages.X``), each in its own process: they may run git in their clone.
# The orchestrator never imports them (test_nothing_imports_the_stage_programs).
STAGE_PROGRAMS = PACKAGE / "stages"


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STAGE_PROGRAMS not in p.parents)


def recovery_modules() -> list[Path]:
    return [p for p in modules() if "recovery" in p.parts]


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imported(tree: ast.AST, path: Path) -> Iterator[str]:
    """Every module name an import statement in ``tree`` brings in (relative ones resolved)."""
    package_parts = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package_parts[: len(package_parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"


def os_process_calls(tree: ast.AST) -> Iterator[str]:
    """``os.system(...)``, ``os.execv(...)``, ``from os import spawnv`` and the like, and
    the same through ``posix`` (what ``os`` wraps: the reaper uses it directly)."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in OS_MODULES
        ):
            if node.attr.startswith(OS_PROCESS_CALLS):
                yield f"{node.value.id}.{node.attr}"
        if isinstance(node, ast.ImportFrom) and node.module in OS_MODULES:
            for alias in node.names:
                if alias.name.startswith(OS_PROCESS_CALLS):
                    yield f"from {node.module} import {alias.name}"


@functools.cache
def parsed(path: Path) -> ast.AST:
    """The module's syntax tree, parsed once for every rule below (none changes it)."""
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def imports_in(path: Path) -> tuple[str, ...]:
    """``imported`` over the module's tree, walked once for every rule below: walking
    the package's trees again for each rule was most of these tests' time."""
    return tuple(imported(parsed(path), path))


def each_module(check: Callable[[Path], None], paths: Iterable[Path]) -> list[str]:
    """``check`` on every module: what it refused, one line a module (empty: none). One
    test per rule over the whole package, rather than one per module: the same
    assertions, in a hundredth of the time."""
    refused = []
    for path in paths:
        try:
            check(path)
        except AssertionError as exc:
            refused.append(f"{rel(path)}: {exc}")
    return refused


def matches(name: str, roots: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


def fresh_interpreter(code: str, *, cwd: Path | None = None) -> str:
    """What ``code`` prints when run by a new Python (so only what it imports is loaded);
    it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        cwd=cwd,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_nothing_in_recovery_can_execute_anything() -> None:
    assert each_module(_nothing_in_recovery_can_execute_anything, recovery_modules()) == []


def _nothing_in_recovery_can_execute_anything(path: Path) -> None:
    tree = parsed(path)
    forbidden = PROCESS_MODULES | {
        "orchestrator.execution.runner",
        "orchestrator.app.substrate",
        "git",
    }
    bad = sorted({name for name in imports_in(path) if matches(name, forbidden)})
    assert bad == [], f"{rel(path)} imports {bad}"
    assert list(os_process_calls(tree)) == [], rel(path)


def test_only_the_runner_starts_processes() -> None:
    assert each_module(_only_the_runner_starts_processes, modules()) == []


def _only_the_runner_starts_processes(path: Path) -> None:
    if rel(path) in (RUNNER, REAPER, LAUNCHER, BRIDGE, SANDBOX_INIT):
        return
    tree = parsed(path)
    bad = sorted({name for name in imports_in(path) if matches(name, PROCESS_MODULES)})
    assert bad == [], (
        f"{rel(path)} imports {bad}: processes start in orchestrator/execution/runner.py only"
    )
    assert list(os_process_calls(tree)) == [], rel(path)
    if rel(path) not in GITPYTHON_ALLOWED:
        uses_git = sorted({n for n in imports_in(path) if matches(n, {"git"})})
        assert uses_git == [], f"{rel(path)} imports GitPython, which starts git processes"


def test_the_reaper_is_the_runners_other_half_and_nothing_else() -> None:
    """The reaper may start processes only because the runner starts it: no
    module imports it (it would be a second door), and it imports only what Python has
    built in (it runs with ``-I -S``, outside our package, once per stage)."""
    reaper = ROOT / REAPER
    names = set(imported(parsed(reaper), reaper))
    assert not any(matches(n, {"orchestrator"}) for n in names), sorted(names)
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names), sorted(names)
    assert not (names & PROCESS_MODULES), "it forks and execs itself, without subprocess"
    assert sorted(set(os_process_calls(parsed(reaper)))) == ["posix.execve", "posix.fork"]
    for path in modules():
        bad = {n for n in imports_in(path) if matches(n, {"orchestrator.execution.reaper"})}
        assert bad == set(), f"{rel(path)} imports the reaper: only the runner runs it, by path"
    mentions = sorted(rel(p) for p in modules() if "reaper.py" in p.read_text() and p != reaper)
    assert mentions == [RUNNER], mentions
    # The runner imports it as a top-level module from its own directory (for the cached
    # bytecode): no neighbour there may shadow a module the reaper imports.
    neighbours = {p.stem for p in reaper.parent.glob("*.py")}
    assert not neighbours & {n.split(".")[0] for n in names}, sorted(neighbours & names)


def test_the_sandbox_launcher_only_execs_what_it_is_given_and_imports_nothing_of_ours() -> None:
    """It is a command's first step inside a sandboxed start (the runner starts it, by
    path, as the command): it execs bwrap and starts nothing else; it imports only what
    Python has built in; only the sandbox module names it."""
    launcher = ROOT / LAUNCHER
    names = set(imported(parsed(launcher), launcher))
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names), sorted(names)
    assert not (names & PROCESS_MODULES)
    assert sorted(set(os_process_calls(parsed(launcher)))) == ["posix.execv"]
    mentions = sorted(
        rel(p) for p in modules() if "sandbox_launch" in p.read_text() and p != launcher
    )
    assert mentions == ["orchestrator/execution/sandbox.py"], mentions


def test_the_egress_bridge_only_execs_what_it_is_given_and_imports_nothing_of_ours() -> None:
    """The sandbox's way out to the egress proxy (issue 40): run by path inside the
    sandbox, before the command, it forks its helper (which only accepts connections and
    passes their descriptors on) and execs the command it is given; it imports only what
    Python has built in; only the sandbox module names it."""
    bridge = ROOT / BRIDGE
    names = set(imported(parsed(bridge), bridge))
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names), sorted(names)
    assert not any(matches(n, {"orchestrator"}) for n in names), sorted(names)
    assert not (names & PROCESS_MODULES)
    assert sorted(set(os_process_calls(parsed(bridge)))) == ["posix.execv", "posix.fork"]
    mentions = sorted(rel(p) for p in modules() if "egress_bridge" in p.read_text() and p != bridge)
    assert mentions == ["orchestrator/execution/sandbox.py"], mentions


def test_the_sandbox_init_only_runs_what_it_is_given_and_imports_nothing_of_ours() -> None:
    """The sandbox's PID 1 (issue 41): run by path inside the sandbox, it forks and execs
    the command it is given and reports how it ended; it imports only what Python has
    built in; only the sandbox module names it."""
    init = ROOT / SANDBOX_INIT
    names = set(imported(parsed(init), init))
    assert {n.split(".")[0] for n in names} <= set(sys.stdlib_module_names), sorted(names)
    assert not any(matches(n, {"orchestrator"}) for n in names), sorted(names)
    assert not (names & PROCESS_MODULES)
    assert sorted(set(os_process_calls(parsed(init)))) == ["posix.execv", "posix.fork"]
    mentions = sorted(rel(p) for p in modules() if "sandbox_init" in p.read_text() and p != init)
    assert mentions == ["orchestrator/execution/sandbox.py"], mentions


def test_only_the_gateway_imports_the_model_sdk() -> None:
    assert each_module(_only_the_gateway_imports_the_model_sdk, modules()) == []


def _only_the_gateway_imports_the_model_sdk(path: Path) -> None:
    names = {n for n in imports_in(path) if matches(n, SDK_MODULES)}
    if rel(path) == "orchestrator/recovery/anthropic_gateway.py":
        assert "anthropic" in names
    else:
        assert names == set(), f"{rel(path)} imports {sorted(names)}"


def test_only_the_prefilter_imports_re2() -> None:
    assert each_module(_only_the_prefilter_imports_re2, modules()) == []


def _only_the_prefilter_imports_re2(path: Path) -> None:
    # The scan's speed-up is optional (no wheel on some platforms): one module decides
    # whether it is there, and everything else works through it.
    names = {n for n in imports_in(path) if matches(n, {"re2"})}
    if rel(path) == "orchestrator/reading/prefilter.py":
        assert "re2" in names
    else:
        assert names == set(), f"{rel(path)} imports {sorted(names)}"


def test_the_gateway_imports_the_sdk_lazily() -> None:
    path = PACKAGE / "recovery" / "anthropic_gateway.py"
    tree = parsed(path)
    top_level = [
        node
        for node in tree.body  # type: ignore[attr-defined]
        if isinstance(node, (ast.Import, ast.ImportFrom))
        and any(
            matches(n, SDK_MODULES)
            for n in imported(ast.Module(body=[node], type_ignores=[]), path)
        )
    ]
    assert top_level == [], "the SDK must be imported inside functions (it costs most of a second)"


def test_the_scanner_sees_what_it_must_refuse(tmp_path: Path) -> None:
    """The checks above can fail: a module doing each forbidden thing is caught."""
    sample = tmp_path / "orchestrator" / "recovery" / "evil.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(
        "import subprocess\nfrom os import execv\nimport os\nos.system('x')\n"
        "from ..execution import runner\nfrom orchestrator.app.substrate import apply\nimport anthropic\n"
    )
    tree = ast.parse(sample.read_text())
    # Resolved as if it sat in the package, so the relative import names the runner.
    names = set(imported(tree, PACKAGE / "recovery" / "evil.py"))
    assert "subprocess" in names and "anthropic" in names
    assert "orchestrator.execution.runner" in names and "orchestrator.app.substrate.apply" in names
    assert sorted(os_process_calls(tree)) == ["from os import execv", "os.system"]


def test_nothing_imports_the_stage_programs() -> None:
    assert each_module(_nothing_imports_the_stage_programs, modules()) == []


def _nothing_imports_the_stage_programs(path: Path) -> None:
    """A stage is a separate program; importing one would run its git calls in-process."""
    bad = sorted({n for n in imports_in(path) if matches(n, {"orchestrator.stages"})})
    assert bad == [], f"{rel(path)} imports {bad}: stages run through the runner only"


DEMO = PACKAGE / "demo"
# The one door into the demo: the `orchestrator demo` command, importing it lazily.
DEMO_COMMAND = PACKAGE / "cli" / "commands" / "demo.py"


def test_nothing_the_pipeline_imports_imports_the_demo() -> None:
    assert (
        each_module(
            _nothing_the_pipeline_imports_imports_the_demo,
            [p for p in modules() if DEMO not in p.parents and p != DEMO_COMMAND],
        )
        == []
    )


def _nothing_the_pipeline_imports_imports_the_demo(path: Path) -> None:
    """The demo is a fixture builder (GitPython, example data), not part of the product:
    the pipeline must run, and install, as if it were absent."""
    bad = sorted({n for n in imports_in(path) if matches(n, {"orchestrator.demo"})})
    assert bad == [], f"{rel(path)} imports {bad}: only `orchestrator demo` may"


def test_the_demo_command_imports_the_demo_only_when_chosen() -> None:
    """Module level of the command stays free of the demo: `--help` never loads it."""
    tree = ast.parse(DEMO_COMMAND.read_text())
    top_level = ast.Module(
        body=[n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)], type_ignores=[]
    )
    assert not any(matches(n, {"orchestrator.demo"}) for n in imported(top_level, DEMO_COMMAND))
    assert any(matches(n, {"orchestrator.demo"}) for n in imported(tree, DEMO_COMMAND))


@pytest.mark.slow
def test_running_a_ticket_never_loads_the_demo(tmp_path: Path) -> None:
    """The same, at run time: a real run through the CLI in a fresh interpreter."""
    config = write_config(tmp_path, bash_stage("a", "exit 0") + bash_stage("b", "exit 3"))
    ticket = write_ticket(tmp_path / "t")
    probe = (
        "import sys\n"
        "from orchestrator.cli.main import main\n"
        f"code = main(['--config', {str(config)!r}, 'run', {str(ticket)!r}])\n"
        "main(['--config', " + repr(str(config)) + ", 'runs'])\n"
        "print(code, sorted(m for m in sys.modules if m.startswith('orchestrator.demo')))\n"
    )
    assert fresh_interpreter(probe).splitlines()[-1] == "4 []"


@pytest.mark.slow
def test_the_recovery_modules_load_no_code_that_acts() -> None:
    """The vocabulary (names, verdict types, rules) reaches recovery/ from domain/; no
    action's code (plan or apply) is loaded by the decision."""
    recovery = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (PACKAGE / "recovery").glob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for name in {recovery!r}: importlib.import_module(name)\n"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = set(fresh_interpreter(code, cwd=ROOT).split())
    assert "orchestrator.domain.vocabulary" in loaded  # the check looks where it should
    acting = ("orchestrator.actions", "orchestrator.execution", "orchestrator.app",
              "orchestrator.storage", "orchestrator.reports", "subprocess")  # fmt: skip
    assert sorted(m for m in loaded if matches(m, set(acting))) == []


def test_nothing_in_recovery_names_an_actions_apply() -> None:
    assert each_module(_nothing_in_recovery_names_an_actions_apply, recovery_modules()) == []


def _nothing_in_recovery_names_an_actions_apply(path: Path) -> None:
    bad = sorted(
        n for n in imports_in(path)
        if n.startswith("orchestrator.actions.") and n.rsplit(".", 1)[-1] in ("apply", "stop")
    )  # fmt: skip
    assert bad == [], f"{rel(path)} imports {bad}"


RUNNER_ENTRY_POINTS = {"run_process", "capture_head"}


def runner_calls(tree: ast.AST, path: Path) -> Iterator[str]:
    """``runner.run_process(...)``-style uses and ``from ...runner import capture_head``."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "runner"
            and node.attr in RUNNER_ENTRY_POINTS
        ):
            yield f"runner.{node.attr}"
    for name in imported(tree, path):
        if name.startswith("orchestrator.execution.runner.") and (
            name.rsplit(".", 1)[-1] in RUNNER_ENTRY_POINTS
        ):
            yield name


def test_only_the_executor_calls_the_runner() -> None:
    assert each_module(_only_the_executor_calls_the_runner, modules()) == []


def _only_the_executor_calls_the_runner(path: Path) -> None:
    if rel(path) in ("orchestrator/execution/runner.py", "orchestrator/execution/executor.py"):
        return
    bad = sorted(set(runner_calls(parsed(path), path)))
    assert bad == [], f"{rel(path)} uses {bad}: start processes through the Executor"


def test_the_runner_call_scanner_sees_what_it_must_refuse() -> None:
    sample = PACKAGE / "app" / "evil.py"
    tree = ast.parse(
        "from orchestrator.execution import runner\n"
        "from orchestrator.execution.runner import capture_head\n"
        "runner.run_process(('git',))\n"
    )
    assert sorted(set(runner_calls(tree, sample))) == [
        "orchestrator.execution.runner.capture_head",
        "runner.run_process",
    ]


REDIS_STORES = PACKAGE / "storage" / "redis"
CELERY_EXECUTOR = PACKAGE / "batch" / "celery"
# Each library of the fleet → the one package that may import it.
QUEUE_IMPORTERS = {
    "redis": REDIS_STORES,
    "celery": CELERY_EXECUTOR,
    "kombu": CELERY_EXECUTOR,
    "billiard": CELERY_EXECUTOR,
}
QUEUE_MODULES = set(QUEUE_IMPORTERS)


def _top_level_imports(tree: ast.Module, path: Path) -> set[str]:
    """What a module imports when it is loaded: its module-level imports, outside
    ``if TYPE_CHECKING:`` (which only the type checker reads)."""
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            body.append(node)
        elif isinstance(node, ast.If) and not (
            isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        ):
            body.extend(
                n for n in node.body + node.orelse if isinstance(n, ast.Import | ast.ImportFrom)
            )
        elif isinstance(node, ast.Try):
            body.extend(n for n in node.body if isinstance(n, ast.Import | ast.ImportFrom))
    return set(imported(ast.Module(body=body, type_ignores=[]), path))


def test_only_the_fleet_packages_import_the_queue_and_only_lazily() -> None:
    assert each_module(_only_the_fleet_packages_import_the_queue_and_only_lazily, modules()) == []


def _only_the_fleet_packages_import_the_queue_and_only_lazily(path: Path) -> None:
    tree = parsed(path)
    assert isinstance(tree, ast.Module)
    for library, owner in QUEUE_IMPORTERS.items():
        anywhere = {n for n in imports_in(path) if matches(n, {library})}
        if owner not in path.parents:
            assert anywhere == set(), (
                f"{rel(path)} imports {sorted(anywhere)}: only {rel(owner)}/ may"
            )
    loaded = {n for n in _top_level_imports(tree, path) if matches(n, QUEUE_MODULES)}
    assert loaded == set(), (
        f"{rel(path)} imports {sorted(loaded)} when loaded: import it inside the function"
    )


def test_the_queue_import_scanner_sees_what_it_must_refuse(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\nimport redis\nif TYPE_CHECKING:\n    import celery\n"
        "try:\n    import kombu\nexcept ImportError:\n    pass\n"
        "def f():\n    import billiard\n"
    )
    tree = ast.parse(sample.read_text())
    as_if = CELERY_EXECUTOR / "evil.py"  # resolved as if it sat in the package
    assert {n for n in _top_level_imports(tree, as_if) if matches(n, QUEUE_MODULES)} == {
        "redis",
        "kombu",
    }
    assert {n for n in imported(tree, as_if) if matches(n, QUEUE_MODULES)} == QUEUE_MODULES


def test_help_run_and_the_local_batch_load_no_queue_module(tmp_path: Path) -> None:
    """At run time, in a fresh interpreter: the CLI's help, then a local batch of one
    ticket (with a broker configured, which the local mode ignores)."""
    config = write_config(
        tmp_path,
        bash_stage("a", "exit 0"),
        header='[distributed]\nbroker_url = "redis://:pw-xyz@127.0.0.1:1/0"\n',
    )
    tickets = tmp_path / "tickets"
    write_ticket(tickets)
    probe = (
        "import contextlib, io, sys\n"
        "from orchestrator.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"    code = main(['--config', {str(config)!r}, 'batch', '--tickets', {str(tickets)!r}])\n"
        "assert 'usage: orchestrator' in out.getvalue(), out.getvalue()\n"
        "queue = sorted(m for m in sys.modules if m.split('.')[0] in "
        + repr(sorted(QUEUE_MODULES))
        + ")\n"
        "print(code, queue, 'T-1' in out.getvalue())\n"
    )
    assert fresh_interpreter(probe).splitlines()[-1] == "0 [] True"
