from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import load_config, parse_config
from orchestrator.domain.errors import ConfigError

from conftest import ROOT, subprocess_env
from support.scripted_cli import run_forked

MINIMAL = '[[stages]]\nname = "a"\ncommand = ["true"]\n'


def error_for(text: str, tmp_path: Path) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


def test_default_config_is_valid_and_carries_the_caps() -> None:
    loaded = load_config(ROOT / "config.toml")
    config = loaded.config
    assert [s.name for s in config.stages] == ["clone", "implement", "review", "open-pr"]
    assert config.recovery.max_diag_invocations_per_ticket == 2
    assert config.recovery.max_retries_per_ticket == 2
    assert config.stage("open-pr").side_effectful
    assert not config.stage("review").side_effectful
    assert [c.name for c in config.stage("review").checks] == [
        "lint-bug-commit-order",
        "project-tests",
    ]
    assert config.stage("implement").engine == "patch"
    assert loaded.root == ROOT


def test_config_models_are_frozen(tmp_path: Path) -> None:
    config = parse_config(MINIMAL, tmp_path / "c.toml")
    with pytest.raises(Exception, match="frozen"):
        config.stages[0].timeout_s = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            MINIMAL + "[recovery]\nmax_retries_per_ticket = -1\n",
            "recovery.max_retries_per_ticket: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            MINIMAL + '[recovery]\nmax_diag_invocations_per_ticket = "2"\n',
            "recovery.max_diag_invocations_per_ticket: Input should be a valid integer (got '2')",
        ),
        (
            MINIMAL + "[recovery]\nmax_retry_per_ticket = 2\n",
            "recovery.max_retry_per_ticket: unknown key (not allowed here)",
        ),
        (
            '[[stages]]\nname = "a"\ncommand = ["true"]\ncolour = 1\n',
            "stages[0].colour: unknown key (not allowed here)",
        ),
        (
            '[[stages]]\nname = "a"\ncommand = ["true"]\ntimeout_s = "5"\n',
            "stages[0].timeout_s: Input should be a valid number (got '5')",
        ),
        (
            '[[stages]]\nname = "a"\ncommand = ["true"]\ntimeout_s = 0\n',
            "stages[0].timeout_s: Input should be greater than 0 (got 0)",
        ),
        (
            '[[stages]]\nname = "a"\ncommand = []\n',
            "stages[0].command: expected at least 1 item(s) (got [])",
        ),
        ('[[stages]]\ncommand = ["true"]\n', "stages[0].name: required key is missing"),
        ("stages = []\n", "stages: expected at least 1 item(s) (got [])"),
        (
            '[[stages]]\nname = "a"\n',
            "stages[0]: a stage needs exactly one of 'command', 'engine' or 'checks'",
        ),
        (
            '[[stages]]\nname = "a"\ncommand = ["x"]\nengine = "e"\n',
            "stages[0]: a stage needs exactly one of 'command', 'engine' or 'checks', not command and engine",
        ),
        (
            '[[stages]]\nname = "a"\nengine = "nope"\n',
            "stage 'a' uses engine 'nope', which is not defined under [engines] (defined: none)",
        ),
        (
            '[engines.e]\ncommand = ["x"]\nmodels = ["small", "big"]\n'
            '[[stages]]\nname = "a"\nengine = "e"\nmodel = "huge"\n',
            "stage 'a' uses model 'huge', which is not in engine 'e''s ladder ['small', 'big']",
        ),
        (
            MINIMAL + MINIMAL,
            "stage names must be unique: ['a', 'a']",
        ),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path: Path, text: str, expected: str) -> None:
    message = error_for(text, tmp_path)
    assert message.startswith(f"config error: {tmp_path / 'config.toml'}:")
    assert expected in message


def test_invalid_toml_names_line_and_column(tmp_path: Path) -> None:
    message = error_for("stages = [\n", tmp_path)
    assert message.startswith(f"config error: {tmp_path / 'config.toml'}: invalid TOML:")
    assert "line" in message


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config error: .*/absent.toml: no such file"):
        load_config(tmp_path / "absent.toml")


@pytest.mark.slow
def test_bad_config_exits_2_with_one_message_and_no_traceback(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(MINIMAL + "[recovery]\nmax_retries_per_ticket = 1000\n")
    ticket = tmp_path / "t.md"
    ticket.write_text("irrelevant")
    proc = run_forked(  # its own process, forked as `python -m orchestrator` starts
        Path.cwd(), ["--config", str(config), "run", str(ticket)], subprocess_env(), as_entry=True
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"config error: {config}: recovery.max_retries_per_ticket: "
        "Input should be less than or equal to 100 (got 1000)\n"
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / ".state").exists()


def test_routing_sets_only_what_it_names_and_defaults_come_from_each_action() -> None:
    config = parse_config(MINIMAL + '[routing]\n"mechanical-fix" = 0.5\n', Path("c.toml"))
    assert config.routing.by_action() == {
        "retry": 0.8, "escalate-model": 0.8, "switch-engine": 0.8, "split": 0.9,
        "abandon-human": 0.0, "mechanical-fix": 0.5,
    }  # fmt: skip
    assert parse_config(MINIMAL, Path("c.toml")).routing.by_action()["mechanical-fix"] == 0.85


@pytest.mark.parametrize(
    ("routing", "expected"),
    [
        ("reboot = 0.5", "routing: unknown key 'reboot': not an action (one of: retry, "
         "escalate-model, switch-engine, split, abandon-human, mechanical-fix)"),
        ("retry = 1.5", "routing.retry: Input should be less than or equal to 1 (got 1.5)"),
        ('split = "high"', "routing.split: Input should be a valid number (got 'high')"),
    ],
)  # fmt: skip
def test_a_bad_routing_key_or_value_is_named(routing: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(MINIMAL + f"[routing]\n{routing}\n", Path("c.toml"))
    assert str(caught.value) == f"config error: c.toml: {expected}"


# ---- placeholders gone wrong are refused at load, not in a clone (issue 27) ------------


def test_an_engine_command_with_a_misspelt_or_foreign_placeholder_is_refused_at_load(
    tmp_path: Path,
) -> None:
    said = error_for(
        '[engines.a]\ncommand = ["my-agent", "--task", "{promptfile}", "--in", "{root}"]\n'
        '[[stages]]\nname = "implement"\nengine = "a"\n',
        tmp_path,
    )
    assert str(tmp_path / "config.toml") in said and "engines.a: " in said
    assert "command[2]: {promptfile} is not a placeholder: did you mean {prompt_file}?" in said
    assert "command[4]: {root} is not expanded in an engine's command" in said


def test_a_check_command_with_a_misspelt_placeholder_names_its_key(tmp_path: Path) -> None:
    said = error_for(
        '[[stages]]\nname = "review"\n[[stages.checks]]\nname = "lint"\n'
        'command = ["ruff", "check", "--config", "{rot}/ruff.toml"]\n',
        tmp_path,
    )
    assert (
        "stages[0].checks[0].command: [3]: {rot} is not a placeholder: did you mean {root}?" in said
    )


@pytest.mark.parametrize(
    "argument",
    ['print(f"{x}")', "echo ${HOME} {{clone}}", "{python}", "{root}/s.py", "{run_dir}/{clone}"],
)
def test_a_programs_own_braces_and_known_placeholders_load(tmp_path: Path, argument: str) -> None:
    path = tmp_path / "config.toml"
    # A TOML literal string: the argument exactly as written.
    path.write_text(f'[[stages]]\nname = "a"\ncommand = ["bash", "-c", \'{argument}\']\n')
    assert load_config(path).config.stages[0].command == ("bash", "-c", argument)
