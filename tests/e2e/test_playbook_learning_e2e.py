"""The playbook that learns (issue 44), end to end through the real CLI: real clones, a
real check failing in a real git repository, the model a fake behind the real Anthropic
SDK (an ``httpx2.MockTransport`` that counts every request).

1. A failure the model decides (a mechanical fix, routed auto) is verified green: the
   decision is proposed as a playbook entry, with its provenance, in the ledger too.
2. A person promotes it (``orchestrator playbook promote``).
3. The same failure on another ticket (another clone, another line, another time) is
   decided by the entry: no request reaches the model.
4. The same failure where the entry's fix does not fix it: verification red, the entry is
   retired, and the failure goes to the model (exactly one request).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import httpx2
import pytest

from orchestrator.app import services as app_services
from orchestrator.cli.main import main as cli_main
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.playbook import EntryStatus, PlaybookEntry
from orchestrator.domain.runs import RunRecord
from orchestrator.recovery.anthropic_gateway import AnthropicGateway
from orchestrator.recovery.gateway import ModelGateway
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.playbook import PlaybookStore

from conftest import write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.harness import ALL_AUTO, CLONE_STAGE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

KEY_ENV = "LEARNING_TEST_MODEL_KEY"
MODEL = "claude-sonnet-4-6"

# The engine writes what the ticket's repository drafts (``*notes.in``) as ``notes.txt``:
# the draft carries a marker the lint check forbids, on whatever line it is.
ENGINE = (
    'for f in $(git ls-files "*notes.in"); do cp "$f" "${f%.in}.txt"; done; '
    "git add -A; git commit -q --allow-empty -m draft"
)
# The check names the first marked file by its absolute path, with its line, column and
# the time: what varies between runs of the same failure. A script beside the config (its
# text is not in the log's command line, which is not the failure).
LINT = (
    "hit=$(grep -rn --include=notes.txt TODO-REMOVE . | sort | head -1); "
    'if [ -z "$hit" ]; then echo "lint: clean"; exit 0; fi; '
    "f=${hit%%:*}; rest=${hit#*:}; n=${rest%%:*}; "
    'echo "$(date -u +%H:%M:%S) $PWD/${f#./}:$n:1: E901 forbidden marker TODO-REMOVE"; '
    'echo "1 error"; exit 1'
)
FIX = {
    "action": "mechanical-fix",
    "summary": "remove the drafted notes that carry the forbidden marker",
    "repair_plan": {
        "verification_check": "lint",
        "commands": ["git -C <clone> rm -q notes.txt", "git -C <clone> commit -q -m drop-notes"],
    },
}
GIVE_UP = {"action": "abandon-human", "summary": "the marker is in more than one file"}


def notes(marker_line: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, marker_line)) + "TODO-REMOVE\n"


def config_text(extra: str = "") -> str:
    return (
        'state_dir = "state"\n'
        + ALL_AUTO
        + f'[model]\napi_key_env = "{KEY_ENV}"\nmax_retries = 0\n'
        + "[recovery]\nmax_diag_invocations_per_ticket = 2\nmax_retries_per_ticket = 2\n"
        + extra
        + f"[engines.draft]\ncommand = {json.dumps(['bash', '-c', ENGINE])}\n"
        + CLONE_STAGE
        + '[[stages]]\nname = "implement"\nengine = "draft"\n'
        + '[[stages]]\nname = "review"\nreadable = ["{root}/lint.sh"]\n'
        + '[[stages.checks]]\nname = "lint"\ncommand = ["bash", "{root}/lint.sh"]\n'
    )


def origin(tmp_path: Path, name: str, files: dict[str, str]) -> str:
    work = init_repo(tmp_path / f"{name}-work")
    commit_files(work, {"README.md": "hello\n", **files}, "initial")
    bare_clone(tmp_path / f"{name}-work", tmp_path / "tickets" / f"{name}.git")
    return f"{name}.git"


class FakeModel:
    """The Anthropic Messages API, answered from a script through the real SDK; every
    request that reaches it is counted."""

    def __init__(self) -> None:
        self.script: list[dict[str, Any]] = []
        self.requests = 0

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        if not self.script:
            return httpx2.Response(500, json={"type": "error", "error": {"type": "api_error"}})
        text = json.dumps(self.script.pop(0))
        return httpx2.Response(200, json={
            "id": f"msg_{self.requests}", "type": "message", "role": "assistant",
            "model": f"{MODEL}-20260101", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 60},
        })  # fmt: skip

    def factory(
        self, model: object, environ: Mapping[str, str]
    ) -> Callable[[], ModelGateway | None]:
        def build() -> ModelGateway:
            return AnthropicGateway(
                model=MODEL, api_key=environ[KEY_ENV], timeout_s=5.0, max_retries=0,
                http_client=httpx2.Client(transport=httpx2.MockTransport(self.respond)),
            )  # fmt: skip

        return build


def cli(root: Path, fake: FakeModel, *argv: str) -> tuple[int, str]:
    """The real CLI's ``main`` in this process, in ``root``, with the fake model."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(root),
        "DRY_RUN": "false",
        KEY_ENV: "sk-ant-test-learning-0123456789",
    }
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for name in set(os.environ) - set(env):
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        mp.setattr(app_services, "model_gateway_factory", fake.factory)
        with redirect_stdout(out), redirect_stderr(err):
            code = cli_main(["--config", str(root / "config.toml"), *argv])
    return code, out.getvalue() + err.getvalue()


def latest_run(root: Path, ticket_id: str) -> RunRecord:
    paths = [
        p
        for p in (root / "state" / "runs").glob(f"{ticket_id}-*.json")
        if p.suffixes == [".json"] and not p.name.endswith(".mechanical_fix.json")
    ]
    records = [RunRecord.model_validate_json(p.read_text()) for p in paths]
    return max(records, key=lambda r: r.created_at)


def entries(root: Path) -> list[PlaybookEntry]:
    return [e for e in PlaybookStore(root).entries() if e.match.signature]


def playbook_rows(root: Path) -> list[dict[str, Any]]:
    ledger = root / "state" / "ledger.jsonl"
    rows = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("kind") == "playbook"]


def test_a_proven_fix_is_learned_promoted_used_without_the_model_and_retired_when_wrong(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text(config_text())
    (tmp_path / "lint.sh").write_text(LINT + "\n")
    tickets = tmp_path / "tickets"
    fake = FakeModel()

    # 1. The model decides the failure; the fix is verified green; the decision is proposed.
    repo = origin(tmp_path, "one", {"notes.in": notes(3)})
    fake.script = [FIX]
    code, said = cli(tmp_path, fake, "run", str(write_ticket(tickets, "T-1", repository=repo)))
    first = latest_run(tmp_path, "T-1")
    assert (code, first.state) == (0, RunState.COMPLETED), said
    assert fake.requests == 1
    [decided] = [read_verdict(Path(v.path)) for v in first.verdicts]
    assert (decided.source, decided.action) == ("model", "mechanical-fix")
    assert first.verdicts[0].outcome == "mechanical-fix green: lint passes"
    assert decided.inputs is not None and decided.inputs.failure_signature is not None
    assert decided.inputs.failure_signature.lines == (
        "<time> <dir>/notes.txt:<n>:<n>: E901 forbidden marker TODO-REMOVE",
        "<n> error",
    )
    [entry] = entries(tmp_path)
    assert entry.status is EntryStatus.PROPOSED
    assert entry.match.signature == decided.inputs.failure_signature.lines
    assert (entry.match.stage, entry.match.check) == ("review", "lint")
    assert entry.decision == FIX
    [proof] = entry.provenance
    assert (proof.run_id, proof.ticket_id, proof.verdict, proof.source, proof.approved_by) == (
        first.run_id, "T-1", 1, "model", "auto",
    )  # fmt: skip
    assert proof.decision_id == decided.decision_id
    assert proof.outcome == "mechanical-fix green: lint passes"
    assert (
        f"playbook: verdict 1 proved right (mechanical-fix green: lint passes): entry {entry.id}"
        in said
    )
    # Idempotent: the run's later stage (review passing) and its completion did not add
    # the same outcome again.
    assert [r["decision"]["event"] for r in playbook_rows(tmp_path)] == ["proposed"]

    # 2. A person promotes it.
    code, said = cli(tmp_path, fake, "playbook", "promote", entry.id)
    assert code == 0, said
    [entry] = entries(tmp_path)
    assert entry.status is EntryStatus.PROMOTED

    # 3. The same failure on another ticket: another clone, the marker on another line,
    # another time. Decided by the entry: no request reaches the model.
    repo = origin(tmp_path, "two", {"notes.in": notes(17)})
    code, said = cli(tmp_path, fake, "run", str(write_ticket(tickets, "T-2", repository=repo)))
    second = latest_run(tmp_path, "T-2")
    assert (code, second.state) == (0, RunState.COMPLETED), said
    assert fake.requests == 1  # still only ticket 1's
    [decided] = [read_verdict(Path(v.path)) for v in second.verdicts]
    assert (decided.source, decided.playbook_entry, decided.usage.calls) == (
        "playbook", entry.id, 0,
    )  # fmt: skip
    assert second.verdicts[0].outcome == "mechanical-fix green: lint passes"
    [entry] = entries(tmp_path)
    assert entry.status is EntryStatus.PROMOTED
    assert [(p.ticket_id, p.source) for p in entry.provenance] == [
        ("T-1", "model"), ("T-2", "playbook"),
    ]  # fmt: skip

    # 4. The same failure where the entry's fix leaves the check red (the marker is in a
    # second file too): the entry is retired, and the model is asked, once.
    repo = origin(tmp_path, "three", {"notes.in": notes(5), "docs/notes.in": notes(2)})
    fake.script = [GIVE_UP]
    code, said = cli(tmp_path, fake, "run", str(write_ticket(tickets, "T-3", repository=repo)))
    third = latest_run(tmp_path, "T-3")
    assert third.state is RunState.NEEDS_HUMAN, said
    assert third.halt is not None and third.halt.reason is HaltReason.ABANDONED
    assert fake.requests == 2  # exactly one more
    by_entry, by_model = [read_verdict(Path(v.path)) for v in third.verdicts]
    assert (by_entry.source, by_entry.playbook_entry) == ("playbook", entry.id)
    assert (third.verdicts[0].outcome or "").startswith("mechanical-fix red (verification check")
    assert (by_model.source, by_model.action) == ("model", "abandon-human")
    assert by_model.inputs is not None and by_model.inputs.known is None
    assert by_model.inputs.failure_signature == by_entry.inputs.failure_signature  # type: ignore[union-attr]
    [entry] = entries(tmp_path)
    assert entry.status is EntryStatus.RETIRED
    assert entry.retired_reason is not None
    assert entry.retired_reason.startswith("mechanical-fix red (verification check 'lint'")
    assert entry.retired_reason.endswith(f"(run {third.run_id}, verdict 1)")
    assert f"playbook: entry {entry.id} retired" in said
    assert [r["decision"]["event"] for r in playbook_rows(tmp_path)] == [
        "proposed", "promoted", "agreed", "retired",
    ]  # fmt: skip
    # Each decision replays the same from its files, the retired entry's included: the
    # entry that decided is in the decision's inputs, not read from the playbook again.
    for run in (second, third):
        code, said = cli(tmp_path, fake, "replay", run.run_id)
        assert code == 0, said
        assert said.count(": identical (") == len(run.verdicts), said
    assert fake.requests == 2


def test_promote_after_n_agreeing_outcomes_the_entry_decides_without_a_person(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.toml").write_text(config_text("[playbook]\npromote_after = 2\n"))
    (tmp_path / "lint.sh").write_text(LINT + "\n")
    tickets = tmp_path / "tickets"
    fake = FakeModel()
    for number, line in ((1, 3), (2, 11)):
        # Proposed by the first, still the model's to decide on the second (a proposed
        # entry decides nothing), which agrees: two outcomes promote it.
        repo = origin(tmp_path, f"r{number}", {"notes.in": notes(line)})
        fake.script = [FIX]
        ticket = write_ticket(tickets, f"T-{number}", repository=repo)
        code, said = cli(tmp_path, fake, "run", str(ticket))
        assert code == 0, said
        assert fake.requests == number
    [entry] = entries(tmp_path)
    assert entry.status is EntryStatus.PROMOTED
    assert entry.promoted_by == "auto: 2 agreeing outcomes"
    assert [(p.ticket_id, p.source) for p in entry.provenance] == [
        ("T-1", "model"), ("T-2", "model"),
    ]  # fmt: skip
    repo = origin(tmp_path, "r3", {"notes.in": notes(40)})
    code, said = cli(tmp_path, fake, "run", str(write_ticket(tickets, "T-3", repository=repo)))
    assert code == 0, said
    assert fake.requests == 2  # the third is decided by the entry
    [decided] = [read_verdict(Path(v.path)) for v in latest_run(tmp_path, "T-3").verdicts]
    assert (decided.source, decided.playbook_entry) == ("playbook", entry.id)
    assert [r["decision"]["event"] for r in playbook_rows(tmp_path)] == [
        "proposed", "agreed", "promoted", "agreed",
    ]  # fmt: skip
