"""What is stored about a decision is valid UTF-8, whatever text reached it: a lone
surrogate (text with no UTF-8 form) is replaced and the file says so. Files written
before (texts kept in surrogatepass form) still read."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.domain.proposals import Caps, Failure, RecoveryContext
from orchestrator.recovery.graph import fail_safe
from orchestrator.recovery.transcript import text_digest
from orchestrator.storage.decisions import VerdictRecord, read_verdict, write_verdict
from orchestrator.storage.transcripts import read_texts, write_texts

from support.recovery_fixtures import decision_context, prompt_facts


def record(tmp_path: Path) -> VerdictRecord:
    decision = decision_context(tmp_path)
    ctx = RecoveryContext(
        decision_id="R-1:attempt-2:verdict-1", ticket_id="T-1", run_id="R-1", attempt=2,
        signature="review/project-tests", decision=decision,
        failure=Failure(check="project-tests", output="FAILED", ticket_title="t"),
        facts=prompt_facts(decision), bundle_text="", bundle_path="/b.json",
        inputs_hash="ab" * 32, clone_exists=True, caps=Caps(diagnoses_used=1, max_diagnoses=2),
    )  # fmt: skip
    memory = fail_safe(ctx, "deciding failed", 1, {"abandon-human": 0.0}).require_memory()
    return VerdictRecord(number=1, created_at=datetime(2026, 1, 1, tzinfo=UTC), **dict(memory))


def test_a_verdict_file_with_a_lone_surrogate_is_written_as_valid_utf8(tmp_path: Path) -> None:
    odd = record(tmp_path).model_copy(
        update={"reason": "model said \ud800 here", "errors": ("key \udfff", "fine")}
    )
    path = tmp_path / "R-1.verdict-1.json"
    write_verdict(path, odd)
    data = json.loads(path.read_bytes().decode("utf-8"))  # strict: valid UTF-8
    assert data["reason"] == "model said \ufffd here"
    assert data["errors"] == ["key \ufffd", "fine"]
    assert data["lone_surrogates_replaced"] == 2
    back = read_verdict(path)
    assert back.reason == "model said \ufffd here" and back.lone_surrogates_replaced == 2


def test_a_clean_verdict_file_says_nothing_was_replaced(tmp_path: Path) -> None:
    path = tmp_path / "R-1.verdict-1.json"
    write_verdict(path, record(tmp_path))
    assert read_verdict(path).lone_surrogates_replaced == 0


def test_stored_texts_are_valid_utf8_and_older_surrogatepass_files_still_read(
    tmp_path: Path,
) -> None:
    clean, odd = "plain ✓", "odd \ud800"
    replaced = write_texts(tmp_path, {text_digest(clean): clean, text_digest(odd): odd})
    assert replaced == [text_digest(odd)]
    for file in tmp_path.iterdir():
        file.read_bytes().decode("utf-8")
    texts = read_texts(tmp_path, [text_digest(clean), text_digest(odd)])
    assert texts == {text_digest(clean): clean, text_digest(odd): "odd \ufffd"}

    # A file an older version wrote, with the surrogate in surrogatepass form, still reads.
    older = tmp_path / "older"
    older.mkdir()
    (older / f"{text_digest(odd)}.txt").write_bytes(odd.encode("utf-8", "surrogatepass"))
    assert read_texts(older, [text_digest(odd)]) == {text_digest(odd): odd}
