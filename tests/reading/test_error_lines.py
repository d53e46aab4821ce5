"""A failed stage is reported by what the failed program said (its last error line), not by
a symptom further down the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.reading.error_lines import (
    MAX_CHARS,
    MAX_ERROR_LINES,
    error_lines,
    last_error_line,
    last_error_line_of,
)
from orchestrator.storage.layout import run_record_paths

from conftest import bash_stage, write_config, write_ticket

RUNNER_HEADER = "# orchestrator: 2026-11-30T00:00:00+00:00 cwd=/x\n# $ python clone.py\n"
RUNNER_FOOTER = "# orchestrator: exit 1 after 0.1s\n"


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (
            "/v/bin/python: can't open file '/c/stages/clone.py': [Errno 2] No such file or directory\n",
            "/v/bin/python: can't open file '/c/stages/clone.py': [Errno 2] No such file or directory",
        ),
        (
            'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n'
            "ModuleNotFoundError: No module named 'orchestrator'\n",
            "ModuleNotFoundError: No module named 'orchestrator'",
        ),
        (
            "Cloning into 'clone'...\nfatal: repository '/r/origin.git' does not exist\n",
            "fatal: repository '/r/origin.git' does not exist",
        ),
        ("step 1\nstep 2\nsomething odd\n\n", "something odd"),  # no error word: the last line
        ("", None),
    ],
)
def test_last_error_line(log: str, expected: str | None) -> None:
    assert last_error_line(RUNNER_HEADER + log + RUNNER_FOOTER) == expected


def test_last_error_line_is_redacted_printable_and_bounded() -> None:
    said = last_error_line(
        "fatal: could not read from https://bot:hunter2hunter2@git.example/r.git\n"
    )
    assert said is not None and "hunter2" not in said and said.startswith("fatal: could not read")
    # Colours go (the line as a terminal shows it); any other control character shows as ?.
    assert last_error_line("error: \x1b[31mred\x1b[0m\n") == "error: red"
    assert last_error_line("error: bell\x07 and a lone \x1b\n") == "error: bell? and a lone ?"
    long = last_error_line("error: " + "x" * 5000)
    assert long is not None and len(long) == MAX_CHARS and long.endswith("…")


def test_last_error_line_of_reads_the_tail_and_tolerates_no_file(tmp_path: Path) -> None:
    log = tmp_path / "002-x.log"
    log.write_bytes(b"error: early\n" + b"filler\n" * 10_000 + b"fatal: late\n")
    assert last_error_line_of(log, max_bytes=1024) == "fatal: late"
    assert last_error_line_of(tmp_path / "absent.log") is None
    assert last_error_line_of(None) is None


def test_a_clone_stage_that_cannot_start_is_reported_by_its_own_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config copied away from the stage scripts it names: the console and the halt say
    ``can't open file``, not that the clone is missing."""
    config = write_config(
        tmp_path / "elsewhere",
        '[[stages]]\nname = "clone"\ncommand = ["{python}", "{root}/stages/clone.py"]\n'
        'cwd = "run"\n\n' + bash_stage("after", "exit 0"),
        recovery=True,
    )
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 3
    out = capsys.readouterr().out
    script = tmp_path / "elsewhere" / "stages" / "clone.py"
    said = f"can't open file '{script}': [Errno 2] No such file or directory"
    # Where the failure happens, the console line says it...
    failed = next(line for line in out.splitlines() if line.startswith("  clone: exit 2 in "))
    assert failed.endswith(said)
    # ...and so does the halt, ahead of the symptom it left behind.
    halted = next(line for line in out.splitlines() if line.startswith("  halted: "))
    assert halted.startswith(
        "  halted: precondition_failed at stage clone: synthetic verdict 1: stage 'clone' failed: "
    )
    assert said in halted
    assert halted.index(said) < halted.index("does not exist: nothing to inspect")
    [record] = run_record_paths(tmp_path / "elsewhere" / "state" / "runs")
    assert said in json.loads(record.read_text())["halt"]["detail"]


def test_without_recovery_the_halt_carries_the_last_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path, bash_stage("build", "echo compiling; echo 'error: missing semicolon' >&2; exit 1")
    )
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 4
    out = capsys.readouterr().out
    assert "stage 'build' exited 1: error: missing semicolon; see " in out
    assert "\n  build: exit 1 in " in out
    [failed] = [line for line in out.splitlines() if line.startswith("  build: exit 1 in ")]
    assert failed.endswith("s: error: missing semicolon")
    # A stage that succeeds is reported as before: nothing it printed is echoed.
    ok = write_config(tmp_path / "ok", bash_stage("build", "echo 'error: only a warning'"))
    assert main(["--config", str(ok), "run", str(ticket)]) == 0
    [passed] = [line for line in capsys.readouterr().out.splitlines() if "  build: exit 0" in line]
    assert passed.startswith("  build: exit 0 in ") and passed.endswith("s")


def test_error_lines_end_at_the_last_error_line_redacted_printable_and_bounded() -> None:
    log = (
        "collecting\n"
        "Traceback (most recent call last):\n"
        '  File "app.py", line 9, in main\n'
        "    connect(token)\n"
        "ValueError: bad key sk-ant-api03-" + "A" * 40 + "\n"
        "cleanup done\n"
    )
    said = error_lines(RUNNER_HEADER + log + RUNNER_FOOTER)
    assert said[:4] == [
        "collecting",
        "Traceback (most recent call last):",
        'File "app.py", line 9, in main',
        "connect(token)",
    ]
    assert said[4].startswith("ValueError: bad key ") and "A" * 40 not in said[4]
    assert len(said) == MAX_ERROR_LINES  # "cleanup done" came after the error: left out
    assert error_lines("a\nb\nc\nd\ne\nf\ng\n") == ["c", "d", "e", "f", "g"]  # no error word
    # A terminal sequence (clear the screen) goes; the line is then cut to MAX_CHARS.
    assert error_lines("error: \x1b[2J" + "y" * 1000 + "\n") == ["error: " + "y" * 292 + "…"]
    assert error_lines(RUNNER_HEADER + RUNNER_FOOTER) == []
    assert error_lines("-\twant\n+\tgot\nFAILED\n") == ["-   want", "+   got", "FAILED"]


def test_run_and_show_print_the_failed_stages_last_error_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = (
        "echo step one; echo 'Traceback (most recent call last):' >&2; "
        "echo '  File \"b.py\", line 2' >&2; echo 'KeyError: GITHUB_TOKEN=ghp_"
        + "a" * 36
        + "' >&2; exit 1"
    )
    config = write_config(tmp_path, bash_stage("build", script))
    ticket = write_ticket(tmp_path / "t")
    assert main(["--config", str(config), "run", str(ticket)]) == 4
    out = capsys.readouterr().out.splitlines()
    failed = next(i for i, line in enumerate(out) if line.startswith("  build: exit 1 in "))
    block = out[failed + 1 : failed + 5]
    assert block[:3] == [
        "    | step one",
        "    | Traceback (most recent call last):",
        '    | File "b.py", line 2',
    ]
    assert block[3].startswith("    | KeyError: GITHUB_TOKEN=") and "a" * 36 not in block[3]

    assert main(["--config", str(config), "show", "T-1"]) == 0
    shown = capsys.readouterr().out.splitlines()
    log = next(i for i, line in enumerate(shown) if line.startswith("      log: "))
    assert shown[log + 1 : log + 4] == [
        "      | step one",
        "      | Traceback (most recent call last):",
        '      | File "b.py", line 2',
    ]
    assert "a" * 36 not in "\n".join(shown)
