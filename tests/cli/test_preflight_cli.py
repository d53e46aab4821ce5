"""The preflight through the real CLI, in this process (issue 27): each failure exits 2
before anything runs — no run record, no ledger, not even the state dir — and names its
fix; warnings are said once and the run goes on; ``doctor`` prints the same checklist,
``--json`` too. No test here reaches the network: GitHub is a loopback fake."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import git
import pytest

from orchestrator.cli.main import main

from conftest import write_config, write_ticket
from support.harness import CLONE_STAGE, make_origin

# Machine-independent: nothing here needs the sandbox (its own tests prove it).
UNBOXED = '[sandbox]\ngit = "none"\n'
GITHUB_STAGE = """
[[stages]]
name = "open-pr"
command = ["{python}", "-P", "-m", "orchestrator.stages.open_pr_github"]
side_effectful = true
sandbox = "none"
pass_env = ["GITHUB_TOKEN"]
"""


def stage(command: str, **extra: str) -> str:
    lines = [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(['[[stages]]', 'name = "x"', f"command = {command}", 'cwd = "run"',
                      'sandbox = "none"', *lines]) + "\n"  # fmt: skip


def refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], state: Path, *expected: str
) -> str:
    """``argv`` exits 2 having written nothing under ``state``; stderr holds ``expected``."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("preflight: a run cannot succeed here, so nothing was started:\n")
    for text in expected:
        assert text in err, err
    assert not state.exists()  # no run record, no ledger, no lock
    return err


def test_a_missing_program_stops_run_and_batch_once_before_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, stage('["no-such-tool-xyz", "--go"]'), header=UNBOXED)
    ticket = write_ticket(tmp_path / "tickets", "T-1")
    write_ticket(tmp_path / "tickets", "T-2")
    state = tmp_path / "state"
    expected = (
        "  ✗ program: stage x: no-such-tool-xyz not found — fix: install no-such-tool-xyz, or "
        "put its directory on PATH"
    )
    refused(capsys, ["--config", str(config), "run", str(ticket)], state, expected)
    err = refused(
        capsys,
        ["--config", str(config), "batch", "--tickets", str(tmp_path / "tickets")],
        state,
        expected,
    )
    assert err.count("no-such-tool-xyz not found") == 1  # once per batch, not per ticket
    # The escape hatch: the run goes ahead and fails on the stage, as it did before.
    assert main(["--config", str(config), "run", str(ticket), "--no-preflight"]) == 4
    assert "preflight" not in capsys.readouterr().err


def test_a_missing_pass_env_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEPLOY_TOKEN", raising=False)
    config = write_config(tmp_path, stage('["true"]', pass_env='["DEPLOY_TOKEN"]'), header=UNBOXED)
    ticket = write_ticket(tmp_path / "t")
    refused(
        capsys, ["--config", str(config), "run", str(ticket)], tmp_path / "state",
        "✗ pass_env: stage x: $DEPLOY_TOKEN is not set (pass_env names it) — fix: export "
        "DEPLOY_TOKEN=…, or remove it from pass_env",
    )  # fmt: skip


def test_a_missing_github_token_once_dry_run_lets_the_stage_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, GITHUB_STAGE, header=UNBOXED)
    ticket = write_ticket(tmp_path / "t")
    monkeypatch.setenv("DRY_RUN", "false")
    refused(
        capsys, ["--config", str(config), "run", str(ticket)], tmp_path / "state",
        "✗ forge-token: $GITHUB_TOKEN is not set (stage open-pr pushes and opens a pull "
        "request) — fix: export GITHUB_TOKEN=…",
    )  # fmt: skip


class FakeGitHub(BaseHTTPRequestHandler):
    """Refuses every token, as GitHub does a revoked one; remembers what it was sent."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        FakeGitHub.seen.append((self.path, self.headers.get("Authorization", "")))
        body = b'{"message": "Bad credentials"}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def fake_github() -> Iterator[str]:
    FakeGitHub.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGitHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v3"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_token_github_refuses(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fake_github: str,
) -> None:
    config = write_config(tmp_path, GITHUB_STAGE, header=UNBOXED)
    ticket = write_ticket(tmp_path / "t")
    monkeypatch.setenv("DRY_RUN", "false")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_revoked_0123456789")
    monkeypatch.setenv("ORCHESTRATOR_GITHUB_API_URL", fake_github)
    err = refused(
        capsys, ["--config", str(config), "run", str(ticket)], tmp_path / "state",
        f"✗ forge-token: {fake_github} ($ORCHESTRATOR_GITHUB_API_URL) refused $GITHUB_TOKEN "
        "(HTTP 401) — fix: export a "
        "GITHUB_TOKEN that is valid",
    )  # fmt: skip
    assert FakeGitHub.seen == [("/api/v3/user", "Bearer ghp_revoked_0123456789")]
    assert "ghp_revoked" not in err


def test_a_state_dir_that_cannot_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, stage('["true"]'), header=UNBOXED)
    ticket = write_ticket(tmp_path / "t")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    state = blocker / "state"  # under a regular file: refused even to root
    refused(
        capsys, ["--config", str(config), "--state-dir", str(state), "run", str(ticket)], state,
        f"✗ state-dir: {state}: cannot be created: {blocker} is not a directory — fix: make "
        "it a writable directory, or point state_dir (or --state-dir) elsewhere",
    )  # fmt: skip


def test_an_unreachable_broker_queues_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("redis")
    pytest.importorskip("celery")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]  # nothing listens once the probe is closed
    monkeypatch.setenv("ORCHESTRATOR_BROKER_URL", f"redis://:pw-secret@127.0.0.1:{closed}/0")
    config = write_config(tmp_path, stage('["true"]'), header=UNBOXED)
    write_ticket(tmp_path / "tickets", "T-1")
    argv = ["--config", str(config), "batch", "--backend", "celery", "--tickets",
            str(tmp_path / "tickets")]  # fmt: skip
    err = refused(
        capsys, argv, tmp_path / "state",
        f"✗ broker: redis://:***@127.0.0.1:{closed}/0 unreachable:",
        "fix: start Redis there, or set ORCHESTRATOR_BROKER_URL",
    )  # fmt: skip
    assert "pw-secret" not in err


def test_warnings_are_said_once_and_the_run_goes_on_with_the_configured_author(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no global git identity
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home" / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    make_origin(tmp_path)
    body = CLONE_STAGE + 'sandbox = "none"\n'
    ticket = write_ticket(tmp_path / "tickets", repository=str(tmp_path / "origin.git"))
    recovery = UNBOXED + '[recovery]\nrecipe_sandbox = "none"\n'
    plain = write_config(tmp_path / "plain", body, header=recovery, recovery=True)
    assert main(["--config", str(plain), "run", str(ticket)]) == 0
    err = capsys.readouterr().err
    assert err.count("preflight: ! model-key: $ANTHROPIC_API_KEY is not set") == 1
    assert err.count("preflight: ! git-identity: no user.name and user.email in git config or "
                     "[git]: commits by orchestrator <orchestrator@localhost>") == 1  # fmt: skip

    author = '[git]\nauthor_name = "Release Bot"\nauthor_email = "bot@example.org"\n'
    named = write_config(tmp_path / "named", body, header=recovery + author, recovery=True)
    assert main(["--config", str(named), "run", str(ticket)]) == 0
    assert "git-identity" not in capsys.readouterr().err
    [clone] = (tmp_path / "named" / "state" / "runs").glob("*/clone")
    with git.Repo(clone) as repo:
        reader = repo.config_reader("repository")
        assert reader.get_value("user", "name") == "Release Bot"
        assert reader.get_value("user", "email") == "bot@example.org"


def test_doctor_prints_the_checklist_and_its_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write_config(tmp_path / "good", stage('["true"]'), header=UNBOXED)
    assert main(["--config", str(good), "doctor"]) == 0
    out = capsys.readouterr().out
    assert "✓ program: stage x: true (" in out
    # (A machine without a git identity warns about it: still no failure.)
    assert re.search(r"\n0 failed, [01] warning\(s\): a run can go ahead\n$", out), out

    bad = write_config(tmp_path / "bad", stage('["no-such-tool-xyz"]'), header=UNBOXED)
    assert main(["--config", str(bad), "doctor", "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert set(document) == {"config", "ok", "checks"} and document["ok"] is False
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in document["checks"])
    [failure] = [c for c in document["checks"] if c["status"] == "fail"]
    assert failure["name"] == "program" and failure["detail"] == "stage x: no-such-tool-xyz not found"  # fmt: skip
    assert not (tmp_path / "bad" / "state").exists()  # doctor creates nothing

    assert main(["--config", str(tmp_path / "missing.toml"), "doctor"]) == 2
    assert "config error:" in capsys.readouterr().err
