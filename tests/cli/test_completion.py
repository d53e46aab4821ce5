"""`orchestrator completion bash|zsh`: generated from the parser, and it works in a real bash."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.cli.main import main

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def script(shell: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["completion", shell]) == 0
    return capsys.readouterr().out


def complete(script_path: Path, *words: str) -> list[str]:
    """What bash offers for ``words`` (the last one being completed)."""
    quoted = " ".join("'" + w + "'" for w in words)
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c",
         f'source "$1"; COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}; _orchestrator; '
         'printf "%s\\n" "${COMPREPLY[@]}"', "bash", str(script_path)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout.split()


def test_the_bash_script_registers_and_completes_subcommands_options_and_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "orchestrator.bash"
    path.write_text(script("bash", capsys))
    registered = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", 'source "$1" && complete -p orchestrator',
         "bash", str(path)],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert registered.stdout == "complete -o default -F _orchestrator orchestrator\n"
    assert complete(path, "orchestrator", "ba") == ["batch", "baseline"]
    assert complete(path, "orchestrator", "--config", "c.toml", "ledger", "") == [
        "verify",
        "repair",
        "show",
    ]
    assert complete(path, "orchestrator", "batch", "--backend", "") == ["local", "celery"]
    assert complete(path, "orchestrator", "runs", "--j") == ["--json"]
    # A hidden option is not offered; a file argument is left to bash's own completion.
    assert "--worker" not in complete(path, "orchestrator", "batch", "--")
    assert complete(path, "orchestrator", "run", "") == []


def test_the_zsh_script_is_the_bash_one_through_bashcompinit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    zsh = script("zsh", capsys)
    assert zsh.startswith("#compdef orchestrator\nautoload -U +X bashcompinit && bashcompinit\n")
    assert zsh.endswith(script("bash", capsys))


def test_an_unknown_shell_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["completion", "fish"])
    assert exited.value.code == 2
