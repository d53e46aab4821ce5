"""The state in PostgreSQL, end to end: two machines (each its own config directory,
state dir, HOME and TMPDIR) that share only a database. What one runs, the other shows,
verifies, approves and resumes; nothing of it is on a shared disk."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest

from conftest import bash_stage, subprocess_env, write_config, write_ticket
from support.harness import reply
from support.scripted_cli import CALLS_ENV, SCRIPT_ENV, requests_made, run_forked

DEADLINE_S = 120.0


# A clone the decision can look at (an empty repository), made without a network.
CLONE = '[[stages]]\nname = "clone"\ncwd = "run"\ncommand = ["git", "init", "-q", "clone"]\n'


class Machine:
    """A config directory of its own (the state dir beside it), its own HOME and TMPDIR;
    the model answered from ``script`` (shared: one conversation across machines)."""

    def __init__(
        self,
        root: Path,
        url: str,
        stages: str,
        *,
        header: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        self.root = root
        self.config = write_config(
            root, stages, recovery=bool(header), header=f'[storage]\nurl = "{url}"\n{header}'
        )
        (root / "home" / "tmp").mkdir(parents=True, exist_ok=True)
        self.state = root / "state"
        self.env = env or {}

    def cli(self, *args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
        """One command on this machine, in a process of its own (forked from the test's:
        ``run_forked``), as each machine's cron or person would start it."""
        home = self.root / "home"
        done = run_forked(
            self.root, ["--config", str(self.config), *args],
            subprocess_env(HOME=str(home), TMPDIR=str(home / "tmp"), **self.env),
            timeout_s=DEADLINE_S,
        )  # fmt: skip
        assert code is None or done.returncode == code, done.stdout + done.stderr
        return done


@pytest.mark.slow
def test_what_one_machine_runs_the_other_shows_and_verifies(pg_url: str, tmp_path: Path) -> None:
    stages = bash_stage("a", "echo hello from a") + bash_stage("b", "echo and b >&2")
    one = Machine(tmp_path / "one", pg_url, stages)
    two = Machine(tmp_path / "two", pg_url, stages)
    ticket = write_ticket(tmp_path / "one" / "tickets", "T-1")
    one.cli("run", str(ticket))
    runs = two.cli("runs", "--json").stdout
    assert '"T-1"' in runs and "completed" in runs, runs
    shown = two.cli("show", "T-1").stdout
    assert "completed" in shown, shown
    logs = sorted((two.state / "runs").glob("T-1-*/logs/*"))
    assert logs, sorted(p.relative_to(two.state) for p in two.state.rglob("*"))
    assert any("hello from a" in p.read_text() for p in logs)
    assert not (tmp_path / "one" / "state" / "ledger.jsonl").exists()


@pytest.mark.slow
def test_a_decision_taken_on_one_machine_is_approved_and_carried_out_on_the_other(
    pg_url: str, tmp_path: Path
) -> None:
    # The stage fails its first run, wherever it runs (its count is the test's, not state).
    count = tmp_path / "instrument"
    count.mkdir()
    build = (
        f'[[stages]]\nname = "build"\ncwd = "clone"\nwritable = ["{count}"]\n'
        f'command = ["bash", "-c", "n=$(cat {count}/n 2>/dev/null || echo 0); '
        f'echo $((n+1)) > {count}/n; [ $n -ge 1 ]"]\n'
    )
    script = tmp_path / "script.json"
    script.write_text(json.dumps([reply({"action": "retry", "summary": "flaky build"})]))
    env = {
        "DRY_RUN": "false",
        SCRIPT_ENV: str(script),
        CALLS_ENV: str(tmp_path / "calls"),
        "ORCHESTRATOR_APPROVAL_KEY": secrets.token_hex(32),  # every machine's, as documented
    }
    header = "[routing]\nretry = 1.0\n"  # a person must approve the retry
    one = Machine(tmp_path / "one", pg_url, CLONE + build, header=header, env=env)
    two = Machine(tmp_path / "two", pg_url, CLONE + build, header=header, env=env)
    ticket = write_ticket(tmp_path / "one" / "tickets", "T-1")
    one.cli("run", str(ticket), code=6)  # awaiting approval
    [run_id] = [p.stem for p in (one.state / "runs").glob("T-1-*.json") if p.suffixes == [".json"]]
    two.cli("approve", run_id)
    two.cli("resume", run_id)
    assert requests_made(tmp_path / "calls") == 1  # decided once, on machine one
    shown = json.loads(one.cli("show", run_id, "--json").stdout)
    assert shown["state"] == "completed", shown
    record = json.loads((one.state / "runs" / f"{run_id}.json").read_text())
    # Machine two had no clone: it carried the approved retry out, then made a clone of
    # its own by running every stage again, and said so in the record.
    assert [v["outcome"] for v in record["verdicts"]] == ["retry: re-running build"], record[
        "verdicts"
    ]
    assert [r["needed_by"] for r in record["reclones"]] == ["build"], record["reclones"]
    assert record["run_dir"] == str(one.state / "runs" / run_id)  # paths are this machine's
    for machine in (one, two):
        assert machine.cli("ledger", "verify").stdout.startswith("OK: ")
        assert not (machine.state / "ledger.jsonl").exists()  # the database's, not a file
        assert not (machine.state / "tickets").exists()  # budgets too
    assert (count / "n").read_text() == "2\n"
    # The other readers, from machine two: the decision, its replay, the page.
    [verdict] = [json.loads(line) for line in two.cli("verdicts", "--json").stdout.splitlines()]
    assert (verdict["run_id"], verdict["action"]) == (run_id, "retry"), verdict
    replayed = json.loads(two.cli("replay", run_id, "--json").stdout.splitlines()[0])
    assert replayed["action"] == "retry", replayed
    page = tmp_path / "report.html"
    two.cli("report", run_id, "--out", str(page))
    assert run_id in page.read_text()
    # Pruned on machine two: its logs leave the database too, so a third machine that
    # catches up has the record and the mark, never the logs back.
    pruned = two.cli("prune", "--older-than", "0s").stdout
    assert f"freed {run_id}" in pruned, pruned
    three = Machine(tmp_path / "three", pg_url, CLONE + build, header=header, env=env)
    assert json.loads(three.cli("show", run_id, "--json").stdout)["state"] == "completed"
    assert (three.state / "runs" / run_id / "pruned.json").is_file()
    assert not (three.state / "runs" / run_id / "logs").exists()


@pytest.mark.slow
def test_doctor_reaches_the_state_store_and_never_shows_its_password(
    pg_url: str, tmp_path: Path
) -> None:
    good = Machine(tmp_path / "good", pg_url, bash_stage("a", "true"))
    password = pg_url.split(":")[2].split("@")[0]
    wrong = pg_url.replace(f":{password}@", ":not-the-password@")
    bad = Machine(tmp_path / "bad", wrong, bash_stage("a", "true"))
    for machine, status in ((good, "ok"), (bad, "fail")):
        done = machine.cli("doctor", "--json", code=None)
        checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
        assert checks["storage"]["status"] == status, checks["storage"]
        assert password not in done.stdout + done.stderr
        assert "not-the-password" not in done.stdout + done.stderr
    # A command that needs the state says so before anything runs, and exits 75.
    ticket = write_ticket(tmp_path / "bad" / "tickets", "T-1")
    refused = bad.cli("run", str(ticket), "--no-preflight", code=75)
    assert "cannot reach PostgreSQL at postgresql://postgres:***@" in refused.stderr, refused.stderr
    assert "not-the-password" not in refused.stdout + refused.stderr


@pytest.mark.slow
def test_a_local_batch_with_workers_runs_on_the_database_too(pg_url: str, tmp_path: Path) -> None:
    one = Machine(tmp_path / "one", pg_url, bash_stage("a", "echo a") + bash_stage("b", "echo b"))
    tickets = tmp_path / "one" / "tickets"
    for ticket_id in ("T-1", "T-2", "T-3"):
        write_ticket(tickets, ticket_id)
    done = one.cli("batch", "--tickets", str(tickets), "--jobs", "2", "--json")
    rows = [json.loads(line) for line in done.stdout.splitlines() if '"ticket"' in line]
    assert sorted((r["ticket"], r["status"]) for r in rows) == [
        ("T-1", "completed"), ("T-2", "completed"), ("T-3", "completed"),
    ], done.stdout + done.stderr  # fmt: skip
    two = Machine(tmp_path / "two", pg_url, bash_stage("a", "true") + bash_stage("b", "true"))
    listed = [json.loads(line) for line in two.cli("runs", "--json").stdout.splitlines()]
    assert sorted(r["ticket_id"] for r in listed) == ["T-1", "T-2", "T-3"], listed
