"""A check's ``reports``: relative globs, validated when the config is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import load_config
from orchestrator.domain.errors import ConfigError

CHECK = """
[[stages]]
name = "review"

[[stages.checks]]
name = "tests"
command = ["pytest", "--junitxml=junit.xml"]
"""


def load(tmp_path: Path, text: str) -> tuple[str, ...]:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path).config.stage("review").checks[0].reports


def error_for(tmp_path: Path, reports: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(CHECK + f"reports = {reports}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value).removeprefix(f"config error: {path.resolve()}: ")


def test_reports_default_to_none_and_keep_their_order(tmp_path: Path) -> None:
    assert load(tmp_path, CHECK) == ()
    globs = '["junit.xml", "build/test-results/**/*.xml", "ruff.sarif"]'
    assert load(tmp_path, CHECK + f"reports = {globs}\n") == (
        "junit.xml",
        "build/test-results/**/*.xml",
        "ruff.sarif",
    )


@pytest.mark.parametrize(
    ("reports", "expected"),
    [
        (
            '["../junit.xml"]',
            "stages[0].checks[0].reports[0]: '../junit.xml' must be relative to the clone, without '..'",
        ),
        (
            '["ok.xml", "build/../../x.xml"]',
            "stages[0].checks[0].reports[1]: 'build/../../x.xml' must be relative to the clone, without '..'",
        ),
        (
            '["/etc/passwd"]',
            "stages[0].checks[0].reports[0]: '/etc/passwd' must be relative to the clone, without '..'",
        ),
        (
            '["junit\\u0000.xml"]',
            "stages[0].checks[0].reports[0]: 'junit\\x00.xml' holds a NUL character",
        ),
        (
            '[""]',
            "stages[0].checks[0].reports[0]: String should have at least 1 character (got '')",
        ),
        (
            '"junit.xml"',
            "stages[0].checks[0].reports: Input should be a valid tuple (got 'junit.xml')",
        ),
        ("[1]", "stages[0].checks[0].reports[0]: Input should be a valid string (got 1)"),
    ],
)
def test_a_bad_report_glob_is_a_config_error_naming_the_key(
    tmp_path: Path, reports: str, expected: str
) -> None:
    assert error_for(tmp_path, reports) == expected


def test_at_most_sixteen_report_globs(tmp_path: Path) -> None:
    sixteen = "[" + ", ".join(f'"r{i}.xml"' for i in range(16)) + "]"
    assert len(load(tmp_path, CHECK + f"reports = {sixteen}\n")) == 16
    seventeen = "[" + ", ".join(f'"r{i}.xml"' for i in range(17)) + "]"
    assert error_for(tmp_path, seventeen).startswith(
        "stages[0].checks[0].reports: Tuple should have at most 16 items after validation, not 17"
    )
