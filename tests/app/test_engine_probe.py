"""The preflight's engine check (issue 42, item 5): an engine's program is looked for, and
by ``doctor`` started, where its attempt will start it — inside its stage's sandbox (the
real bubblewrap, the run's own profile). A program the sandbox hides (under /tmp, under a
home it does not bind, behind npm's ``.bin`` link) fails naming the ``readable`` line that
shows it; one that starts but fails its ``--version`` fails with its last words; one that
is nowhere fails as not found; ``sandbox = "none"`` is started outside."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from orchestrator.app.preflight import gather
from orchestrator.cli.main import main
from orchestrator.domain.config import load_config
from orchestrator.domain.preflight import Check, checklist
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.process import (
    CapturedHead,
    HeadRequest,
    ProcessOutcome,
    ProcessRequest,
)

from conftest import write_config, write_ticket
from support.harness import FAKES

VERSION = "2.1.332 (Claude Code)"
CLAUDE = f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "{VERSION}"; exit 0; fi
echo "this stand-in only answers --version" >&2
exit 3
"""
BROKEN = """#!/bin/sh
echo "starting up"
echo "Error: cannot load libclaude.so: no such file" >&2
exit 1
"""


def install(place: Path, text: str = CLAUDE, name: str = "claude") -> Path:
    place.mkdir(parents=True, exist_ok=True)
    program = place / name
    program.write_text(text)
    program.chmod(0o755)
    return program


def config(tmp_path: Path, *stages: str, engine: str = "") -> Path:
    engines = engine or '[engines.claude]\nkind = "claude-code"\nmodels = ["claude-sonnet-4-6"]\n'
    return write_config(tmp_path / "project", engines + "".join(stages))


def stage(name: str = "implement", engine: str = "claude", **keys: str) -> str:
    return f'[[stages]]\nname = "{name}"\nengine = "{engine}"\n' + "".join(
        f"{k} = {v}\n" for k, v in keys.items()
    )


class Counting:
    """The local executor, counting what it is asked to run (the probes)."""

    def __init__(self) -> None:
        self.inner: Executor = LocalExecutor()
        self.runs: list[tuple[str, ...]] = []

    def run(self, request: ProcessRequest) -> ProcessOutcome:
        self.runs.append(request.argv)
        return self.inner.run(request)

    def capture_head(self, request: HeadRequest) -> CapturedHead:
        return self.inner.capture_head(request)


def engine_checks(
    path: Path,
    environ: dict[str, str],
    backend: str = "doctor",
    executor: Executor | None = None,
    timeout_s: float = 20.0,
) -> list[Check]:
    loaded = load_config(path)
    facts = gather(
        loaded, loaded.root / "state", environ, backend=backend,  # type: ignore[arg-type]
        ask_forge=False, executor=executor, engine_timeout_s=timeout_s,
    )  # fmt: skip
    return [check for check in checklist(facts) if check.name == "engine"]


def environ_with(*places: Path, home: Path | None = None) -> dict[str, str]:
    path = os.pathsep.join([*map(str, places), "/usr/bin", "/bin"])
    return {"PATH": path, "HOME": str(home or Path("/nonexistent-home"))}


def test_a_program_the_sandbox_hides_fails_naming_the_readable_line(tmp_path: Path) -> None:
    """Under /tmp (the host's, which the sandbox replaces): PATH finds it, an attempt could
    not; doctor names the install to show (``bin``'s parent) and starts nothing."""
    program = install(tmp_path / "tools" / "bin")
    counting = Counting()
    [check] = engine_checks(
        config(tmp_path, stage()), environ_with(program.parent), executor=counting
    )
    assert check.status == "fail", check
    assert check.detail == (
        f"engine claude (stage implement): claude is {program}; its sandbox hides {program}: "
        "an attempt cannot start it"
    )
    assert check.fix == f'add readable = ["{tmp_path / "tools"}"] to stage implement'
    assert not [argv for argv in counting.runs if "--version" in argv]


def test_under_a_readable_place_it_starts_in_the_sandbox_and_says_its_version(
    tmp_path: Path,
) -> None:
    """Two stages with the same engine and sandbox: one start."""
    program = install(tmp_path / "tools" / "bin")
    readable = f'["{tmp_path / "tools"}"]'
    counting = Counting()
    started = time.monotonic()
    checks = engine_checks(
        config(tmp_path, stage(readable=readable), stage("again", readable=readable)),
        environ_with(program.parent),
        executor=counting,
    )
    took = time.monotonic() - started
    assert [c.status for c in checks] == ["ok", "ok"], checks
    assert checks[0].detail == (
        f"engine claude (stage implement): claude ({program}) starts in its sandbox: {VERSION}"
    )
    probes = [argv for argv in counting.runs if "--version" in argv]
    assert len(probes) == 1 and probes[0][-2:] == ("claude", "--version")
    # Inside bwrap: the probe's argv is the sandbox's, the program at its end.
    assert "bwrap" in Path(probes[0][0]).name
    assert took < 10, took  # one sandbox start (about a tenth of a second here)


def test_a_run_stops_before_anything_when_the_sandbox_hides_its_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's own preflight looks in the sandbox too (without starting the engine)."""
    program = install(tmp_path / "tools" / "bin")
    path = config(tmp_path, stage())
    ticket = write_ticket(tmp_path / "tickets")
    monkeypatch.setenv("PATH", f"{program.parent}{os.pathsep}{os.environ['PATH']}")
    assert main(["--config", str(path), "run", str(ticket)]) == 2
    err = capsys.readouterr().err
    assert "✗ engine: engine claude (stage implement): claude is " in err, err
    assert f'fix: add readable = ["{tmp_path / "tools"}"] to stage implement' in err
    assert not (tmp_path / "project" / "state").exists()


def test_an_npm_link_is_followed_to_the_package_it_leads_into(tmp_path: Path) -> None:
    """``node_modules/.bin/claude`` is a link into ``node_modules``: showing ``.bin`` alone
    leaves the program it leads to hidden; the line to add shows ``node_modules``."""
    modules = tmp_path / "npm" / "node_modules"
    target = install(modules / "@anthropic-ai" / "claude-code" / "bin", name="claude.exe")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "claude").symlink_to("../@anthropic-ai/claude-code/bin/claude.exe")
    shown = f'"{modules / ".bin"}"'
    [check] = engine_checks(
        config(tmp_path, stage(readable=f"[{shown}]")), environ_with(modules / ".bin")
    )
    assert check.status == "fail"
    assert check.detail.endswith(
        f"→ {target}; its sandbox hides {target}: an attempt cannot start it"
    )
    assert check.fix == (
        f'add "{modules}" to stage implement\'s readable: readable = [{shown}, "{modules}"]'
    )
    [check] = engine_checks(
        config(tmp_path, stage(readable=f'["{modules}"]')), environ_with(modules / ".bin")
    )
    assert check.status == "ok" and check.detail.endswith(VERSION), check


def test_under_a_home_the_sandbox_does_not_bind_the_line_says_it_with_a_tilde(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    prefix = home / ".npm-global"
    target = install(
        prefix / "lib" / "node_modules" / "@anthropic-ai" / "claude-code", name="cli.js"
    )
    (prefix / "bin").mkdir()
    (prefix / "bin" / "claude").symlink_to(target)
    [check] = engine_checks(config(tmp_path, stage()), environ_with(prefix / "bin", home=home))
    assert check.status == "fail"
    assert check.fix == 'add readable = ["~/.npm-global"] to stage implement'
    [check] = engine_checks(
        config(tmp_path, stage(readable='["~/.npm-global"]')),
        environ_with(prefix / "bin", home=home),
    )
    assert check.status == "ok", check


def test_a_hidden_interpreter_is_named_too(tmp_path: Path) -> None:
    """A venv's script runs its venv's python: the script shown, the venv hidden, fails."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python3").symlink_to("/bin/sh")
    tools = tmp_path / "tools"
    install(tools, f"#!{venv / 'bin' / 'python3'}\necho {VERSION}\n")
    [check] = engine_checks(config(tmp_path, stage(readable=f'["{tools}"]')), environ_with(tools))
    assert check.status == "fail"
    assert f"its sandbox hides {venv / 'bin' / 'python3'}:" in check.detail
    assert check.fix.startswith(f'add "{venv}" to stage implement\'s readable')


def test_a_program_that_fails_its_version_fails_with_its_last_words(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    install(tools, BROKEN)
    [check] = engine_checks(config(tmp_path, stage(readable=f'["{tools}"]')), environ_with(tools))
    assert check.status == "fail"
    assert check.detail == (
        f"engine claude (stage implement): claude ({tools / 'claude'}): `claude --version` failed "
        "(exit 1): starting up / Error: cannot load libclaude.so: no such file"
    )
    assert check.fix.startswith("run it by hand to see why")


def test_a_program_that_does_not_answer_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    install(tools, "#!/bin/sh\necho waiting for a terminal\nexec sleep 60\n")
    started = time.monotonic()
    [check] = engine_checks(
        config(tmp_path, stage(readable=f'["{tools}"]')), environ_with(tools), timeout_s=1.0
    )
    assert time.monotonic() - started < 15
    assert check.status == "fail"
    assert check.detail.endswith(
        "`claude --version` did not end within 1 s: waiting for a terminal"
    ), check.detail


def test_a_program_that_is_nowhere_is_not_found(tmp_path: Path) -> None:
    [check] = engine_checks(config(tmp_path, stage()), environ_with(tmp_path / "empty"))
    assert check.status == "fail"
    assert check.detail == "engine claude (stage implement): claude not found"
    assert check.fix.startswith("install claude, or put its directory on PATH")


def test_an_unsandboxed_stage_is_started_outside(tmp_path: Path) -> None:
    program = install(tmp_path / "tools" / "bin")
    [check] = engine_checks(config(tmp_path, stage(sandbox='"none"')), environ_with(program.parent))
    assert check.status == "ok"
    assert check.detail == (
        f"engine claude (stage implement): claude ({program}) starts (unsandboxed: sandbox = "
        f'"none"): {VERSION}'
    )


def test_a_command_engine_is_looked_up_inside_not_run_and_patch_has_nothing_to_start(
    tmp_path: Path,
) -> None:
    """A ``command`` engine's program could call a model with any argument: the sandbox's
    ``sh`` only finds it there and tests it can be executed."""
    tools = tmp_path / "tools"
    # Run, it would fail the check (exit 9).
    agent = install(tools, "#!/bin/sh\nexit 9\n", name="my-agent")
    engines = (
        '[engines.agent]\nkind = "command"\ncommand = ["my-agent", "{prompt_file}"]\n'
        '[engines.patch]\nkind = "patch"\n'
    )
    path = config(
        tmp_path, stage(engine="agent", readable=f'["{tools}"]'), stage("p", engine="patch"),
        engine=engines,
    )  # fmt: skip
    agent_check, patch_check = engine_checks(path, environ_with(tools))
    assert agent_check.status == "ok"
    assert agent_check.detail == (
        f"engine agent (stage implement): my-agent ({agent}) starts in its sandbox: {agent}"
    )
    assert patch_check.detail == (
        "engine patch (stage p): the orchestrator applies the patch itself: nothing to start"
    )


def test_the_fakes_start_in_the_sandbox_as_the_released_binaries_do(tmp_path: Path) -> None:
    """``doctor`` on the fast tier's engines: each fake answers ``--version`` with what the
    released binary prints (claude 2.1.332, codex 0.171.0, aider 0.86.1)."""
    engines = (
        '[engines.claude]\nkind = "claude-code"\nmodels = ["m"]\n'
        '[engines.codex]\nkind = "codex"\nmodels = ["m"]\n'
        '[engines.aider]\nkind = "aider"\nmodels = ["m"]\n'
    )
    path = config(tmp_path, stage("a", "claude"), stage("b", "codex"), stage("c", "aider"),
                  engine=engines)  # fmt: skip
    checks = engine_checks(path, environ_with(FAKES))
    assert [check.detail.rsplit(": ", 1)[-1] for check in checks] == [
        "2.1.332 (Claude Code)", "codex-cli 0.171.0", "aider 0.86.1",
    ], checks  # fmt: skip
