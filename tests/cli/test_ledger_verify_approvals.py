"""``orchestrator ledger verify`` checks every approval file: its HMAC by the approval
key, the names it carries, and the digest of the verdict file it answers. A mismatch is
named by file and fails the command; files written before approvals were signed are
named as such and fail it only when asked (``--require-signed``)."""

from __future__ import annotations

import io
import json
import os
import shutil
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.cli.commands.approve import answer
from orchestrator.cli.main import main
from orchestrator.domain.lifecycle import RunState
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.approvals import (
    APPROVAL_KEY_ENV,
    UNSIGNED_BEFORE,
    Approval,
    ApprovalKeys,
    SignedApprovals,
)
from orchestrator.storage.files import FileStorage

from conftest import ROOT, subprocess_env, write_ticket
from support.harness import Harness, make_origin, reply, write_pipeline
from support.scripted_cli import run_forked

pytestmark = pytest.mark.slow

FAILS_ONCE = (
    '[[stages]]\nname = "build"\ncwd = "clone"\n'
    'command = ["bash", "-c", "n=$(cat .build.n 2>/dev/null || echo 0); '
    'echo $((n+1)) > .build.n; [ $n -ge 1 ]"]\n'
)


def approved_run(tmp_path: Path, environ: dict[str, str] | None = None) -> tuple[Path, str]:
    """A retry routed to a person, approved and carried out: the state dir and run id."""
    make_origin(tmp_path)
    config = write_pipeline(tmp_path, FAILS_ONCE, routing="")
    h = Harness(config, ScriptedGateway([reply({"action": "retry", "summary": "flaky"})]))
    if environ is not None:
        h.services = replace(h.services, environ=environ)
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.AWAITING_APPROVAL, h.out.getvalue()
    out = io.StringIO()
    code = answer(
        config, None, record.run_id, approved=True, reason=None, out=out,
        environ=dict(h.services.environ), now=True,
    )  # fmt: skip
    assert code == 0, out.getvalue()
    return tmp_path / "state", record.run_id


def verify(state: Path, capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, str, str]:
    code = main(["--state-dir", str(state), "ledger", "verify", *more])
    said = capsys.readouterr()
    return code, said.out, said.err


def test_an_honest_state_dir_verifies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(APPROVAL_KEY_ENV, raising=False)
    state, _ = approved_run(tmp_path)
    assert verify(state, capsys) == (0, "OK: 2 entries\n", "")
    assert verify(state, capsys, "--require-signed") == (0, "OK: 2 entries\n", "")


@pytest.mark.parametrize(("field", "value"), [("approved", False), ("by", "mallory")])
def test_a_tampered_approval_is_named_and_fails_verify(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    field: str,
    value: object,
) -> None:
    monkeypatch.delenv(APPROVAL_KEY_ENV, raising=False)
    state, run_id = approved_run(tmp_path)
    path = FileStorage(state).approvals.path(run_id, 1)
    tampered = json.loads(path.read_text())
    tampered[field] = value
    path.write_text(json.dumps(tampered))
    code, out, _ = verify(state, capsys)
    assert code == 7
    assert out.startswith("FAILED: 1 approval file(s) do not verify; no run carries one out:\n")
    assert f"  {path}: its HMAC does not match" in out


def test_a_verdict_changed_after_its_approval_fails_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(APPROVAL_KEY_ENV, raising=False)
    state, run_id = approved_run(tmp_path)
    storage = FileStorage(state)
    verdict = storage.decisions.path(run_id, 1)
    verdict.write_bytes(verdict.read_bytes().replace(b'"flaky', b'"not flaky'))
    code, out, _ = verify(state, capsys)
    assert code == 7
    assert (
        f"  {storage.approvals.path(run_id, 1)}: the verdict file changed after it was approved"
    ) in out


def test_approvals_that_cannot_be_checked_or_answer_nothing_fail_verify(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(APPROVAL_KEY_ENV, raising=False)
    state, run_id = approved_run(tmp_path)
    storage = FileStorage(state)
    keys = ApprovalKeys.of(storage.layout.approval_key_path, {})
    # Signed with the right key, for a decision there is no verdict file of.
    orphan = Approval(
        decision_id=f"{run_id}:attempt-9:verdict-2", run_id=run_id, verdict=2, approved=True,
        by="alice", at=datetime.now(UTC), routing="hitl_recommended",
    )  # fmt: skip
    SignedApprovals(storage.approvals, keys).write(orphan, verdict_sha256="0" * 64)
    # Unsigned, yet of the new shape: not something an earlier version wrote.
    first = storage.approvals.path(run_id, 1)
    stripped = json.loads(first.read_text())
    del stripped["hmac"]
    first.write_text(json.dumps(stripped))
    code, out, _ = verify(state, capsys)
    assert code == 7
    assert f"  {first}: unsigned, though it names a verdict digest" in out
    assert f"  {storage.approvals.path(run_id, 2)}: there is no verdict file for it to answer" in (
        out
    )
    # Without the key nothing signed can be checked: that is a failure, not a pass.
    storage.layout.approval_key_path.unlink()
    code, out, _ = verify(state, capsys)
    assert code == 7
    assert (
        f"  {storage.approvals.path(run_id, 2)}: signed, but there is no approval key to "
        f"check it with ({storage.layout.approval_key_path} does not exist)"
    ) in out


def test_a_key_in_the_environment_is_the_one_verify_checks_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "an operator's approval key, shared by every process"
    harness_env = {"PATH": os.environ["PATH"], "DRY_RUN": "false"}
    state, _ = approved_run(tmp_path, {**harness_env, APPROVAL_KEY_ENV: key})
    assert not FileStorage(state).layout.approval_key_path.exists()
    monkeypatch.setenv(APPROVAL_KEY_ENV, key)
    assert verify(state, capsys)[:2] == (0, "OK: 2 entries\n")
    monkeypatch.setenv(APPROVAL_KEY_ENV, "another key, just as long as it")
    code, out, _ = verify(state, capsys)
    assert code == 7 and "its HMAC does not match" in out


def _old_state(tmp_path: Path) -> Path:
    """The kept state dir written before approvals were signed; CARDS-1's verdict made to
    predate decisions keeping their inputs, so its missing ledger row is not held
    against it (as ``test_crash_points`` does)."""
    state = tmp_path / "state"
    shutil.copytree(ROOT / "tests" / "data" / "old_state", state)
    verdict = state / "runs" / "CARDS-1-20261130T232650Z-1a8b.verdict-1.json"
    older = json.loads(verdict.read_text())
    del older["inputs"]
    verdict.write_text(json.dumps(older))
    return state


@pytest.mark.quick
def test_an_old_state_dir_verifies_and_names_its_unsigned_approvals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(APPROVAL_KEY_ENV, raising=False)
    state = _old_state(tmp_path)
    old = [a.path for a in FileStorage(state).approvals.find()]
    assert len(old) == 3
    code, out, err = verify(state, capsys)
    assert (code, out) == (0, "OK: 4 entries\n")
    assert err == (
        f"note: 3 approval file(s) {UNSIGNED_BEFORE}; no run carries one out "
        "(`ledger verify --require-signed` fails on them):\n" + "".join(f"  {p}\n" for p in old)
    )
    assert not FileStorage(state).layout.approval_key_path.exists()  # verify makes no key
    code, out, err = verify(state, capsys, "--require-signed")
    assert code == 7 and err == ""
    assert out == "FAILED: 3 approval file(s) do not verify; no run carries one out:\n" + "".join(
        f"  {p}: {UNSIGNED_BEFORE}\n" for p in old
    )


def test_verify_through_the_cli_keeps_stdout_for_the_verdict_and_stderr_for_the_note(
    tmp_path: Path,
) -> None:
    state = _old_state(tmp_path)
    env = subprocess_env()
    env.pop(APPROVAL_KEY_ENV, None)
    proc = run_forked(  # its own process, forked as `python -m orchestrator` starts
        Path.cwd(), ["--state-dir", str(state), "ledger", "verify"], env, as_entry=True
    )
    assert (proc.returncode, proc.stdout) == (0, "OK: 4 entries\n")
    assert UNSIGNED_BEFORE in proc.stderr
