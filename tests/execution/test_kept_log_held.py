"""A kept log loses the secrets the process holds once its process ends (issue 40,
item 3): every form, wherever a block boundary falls, every other byte as it was."""

from __future__ import annotations

import base64
import os
import stat
import sys
from pathlib import Path

import pytest

from orchestrator.execution import process_log
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.process_log import redact_held, same_length_mark
from orchestrator.execution.runner import run_process
from orchestrator.redaction import REDACTED, HeldSecrets, holding

TOKEN = "dpl+9fK2/mQ7xR4~vL8"
HELD = HeldSecrets([TOKEN])
FORMS = (TOKEN, TOKEN[::-1], base64.b64encode(TOKEN.encode()).decode(), TOKEN.encode().hex())


def test_every_form_goes_and_other_bytes_stay(tmp_path: Path) -> None:
    log = tmp_path / "stage.log"
    log.write_bytes(b"\xff\xfe bad bytes\n" + "\n".join(FORMS).encode() + b"\nend \xc3\n")
    os.chmod(log, 0o600)
    assert redact_held(log, HELD)
    marks = b"\n".join(same_length_mark(len(form)) for form in FORMS)
    inode = log.stat().st_ino
    assert log.read_bytes() == b"\xff\xfe bad bytes\n" + marks + b"\nend \xc3\n"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert not redact_held(log, HELD)  # nothing left: not rewritten
    assert [p.name for p in tmp_path.iterdir()] == ["stage.log"]  # no second copy made
    assert log.stat().st_ino == inode  # rewritten where it lies


@pytest.mark.parametrize("shift", range(0, 40, 3))
def test_a_form_cut_by_a_block_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shift: int
) -> None:
    monkeypatch.setattr(process_log, "CHUNK", 64)
    log = tmp_path / "stage.log"
    body = "x" * (64 - shift) + " " + " ".join(FORMS * 3) + " " + "y" * 100
    log.write_text(body)
    assert redact_held(log, HELD)
    kept = log.read_text()
    assert not any(form in kept for form in FORMS)
    marks = " ".join(same_length_mark(len(form)).decode() for form in FORMS * 3)
    assert kept == "x" * (64 - shift) + " " + marks + " " + "y" * 100


def test_nothing_held_or_found_leaves_the_file(tmp_path: Path) -> None:
    log = tmp_path / "stage.log"
    log.write_text("ordinary output\n")
    before = log.stat()
    assert not redact_held(log, HeldSecrets())
    assert not redact_held(log, HELD)
    assert log.stat().st_ino == before.st_ino


def test_the_runner_redacts_the_log_when_its_process_ends(tmp_path: Path) -> None:
    printer = "import sys; print(*sys.argv[1:], sep='\\n')"
    request = ProcessRequest(
        (sys.executable, "-c", printer, *FORMS), cwd=tmp_path, env={"PATH": os.environ["PATH"]},
        log_path=tmp_path / "stage.log", timeout_s=30, kill_after_s=1,
    )  # fmt: skip
    with holding([TOKEN]):
        outcome = run_process(request)
    assert outcome.exit_code == 0
    kept = (tmp_path / "stage.log").read_text()
    assert not any(form in kept for form in FORMS)
    assert kept.count(REDACTED[:-1]) >= len(FORMS)


@pytest.mark.parametrize("size", [2, 8, 9, 10, 11, 40])
def test_a_mark_is_as_long_as_what_it_covers_and_says_redacted_where_it_fits(size: int) -> None:
    mark = same_length_mark(size)
    assert len(mark) == size and mark.startswith(b"[") and mark.endswith(b"]")
    assert (mark.startswith(REDACTED[:-1].encode())) == (size >= len(REDACTED))
