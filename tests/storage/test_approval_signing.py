"""Approvals are signed by a key no stage is handed and bound to the verdict file they
answer: what a stage can write (an unsigned file, a made-up HMAC, a real approval over a
verdict changed since) is refused on reading. The key is made once, 0600, never shown."""

from __future__ import annotations

import json
import pickle
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.domain.errors import StateError
from orchestrator.storage.approvals import (
    APPROVAL_KEY_ENV,
    UNSIGNED_BEFORE,
    Approval,
    ApprovalKey,
    ApprovalKeys,
    ApprovalRefused,
    SignedApprovals,
    verdict_sha256,
)
from orchestrator.storage.files import FileStorage

RUN = "CARDS-1-20261130T014500Z-3fa2"
VERDICT = b'{"the": "verdict file, as persisted"}\n'
DIGEST = verdict_sha256(VERDICT)


def answer(**changes: object) -> Approval:
    fields: dict[str, object] = {
        "decision_id": f"{RUN}:attempt-2:verdict-1",
        "run_id": RUN,
        "verdict": 1,
        "approved": True,
        "by": "alice",
        "at": datetime(2026, 11, 30, 1, 45, 0, 123456, tzinfo=UTC),
        "routing": "hitl_recommended",
        **changes,
    }
    return Approval.model_validate(fields)


def signed_store(root: Path, environ: dict[str, str] | None = None) -> SignedApprovals:
    storage = FileStorage(root)
    keys = ApprovalKeys.of(storage.layout.approval_key_path, environ or {})
    return SignedApprovals(storage.approvals, keys)


@pytest.mark.quick
def test_an_approval_is_written_signed_and_bound_and_reads_back_verified(tmp_path: Path) -> None:
    approvals = signed_store(tmp_path)
    written = approvals.write(answer(), verdict_sha256=DIGEST)
    assert written.verdict_sha256 == DIGEST and written.hmac is not None
    stored = json.loads(approvals.path(RUN, 1).read_text())
    assert stored["verdict_sha256"] == DIGEST and stored["hmac"] == written.hmac
    # Read back by another process (a fresh store: the key comes from its file).
    assert signed_store(tmp_path).read(RUN, 1, verdict_sha256=DIGEST) == written
    assert signed_store(tmp_path).read(RUN, 2, verdict_sha256=DIGEST) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("approved", False), ("by", "mallory"), ("routing", "auto"), ("reason", "edited")],
)
def test_an_approval_edited_after_signing_is_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    approvals = signed_store(tmp_path)
    approvals.write(answer(), verdict_sha256=DIGEST)
    path = approvals.path(RUN, 1)
    edited = json.loads(path.read_text())
    edited[field] = value
    path.write_text(json.dumps(edited))
    with pytest.raises(ApprovalRefused, match="its HMAC does not match"):
        approvals.read(RUN, 1, verdict_sha256=DIGEST)


def test_an_approval_signed_with_another_key_is_refused(tmp_path: Path) -> None:
    """What a stage that guessed everything but the key writes: a well-formed approval
    with a digest and an HMAC of its own making."""
    forger = signed_store(tmp_path / "elsewhere", {APPROVAL_KEY_ENV: "k" * 32})
    forged = forger.write(answer(), verdict_sha256=DIGEST)
    approvals = signed_store(tmp_path)
    approvals.keys.for_signing()  # the state dir has its key (made by an earlier answer)
    approvals.path(RUN, 1).parent.mkdir(parents=True)
    approvals.path(RUN, 1).write_text(forged.model_dump_json())
    with pytest.raises(ApprovalRefused, match="its HMAC does not match") as refused:
        approvals.read(RUN, 1, verdict_sha256=DIGEST)
    assert refused.value.where == approvals.path(RUN, 1)


def test_an_approval_of_a_verdict_changed_since_is_refused(tmp_path: Path) -> None:
    approvals = signed_store(tmp_path)
    approvals.write(answer(), verdict_sha256=DIGEST)
    changed = verdict_sha256(VERDICT.replace(b"persisted", b"rewritten"))
    with pytest.raises(ApprovalRefused, match="the verdict file changed after it was approved"):
        approvals.read(RUN, 1, verdict_sha256=changed)


def test_an_approval_moved_to_another_decisions_name_is_refused(tmp_path: Path) -> None:
    approvals = signed_store(tmp_path)
    approvals.write(answer(), verdict_sha256=DIGEST)
    approvals.path(RUN, 1).rename(approvals.path(RUN, 2))
    with pytest.raises(ApprovalRefused, match=f"it answers verdict 1 of {RUN}, not verdict 2"):
        approvals.read(RUN, 2, verdict_sha256=DIGEST)


def test_unsigned_approvals_are_refused_and_the_old_shape_is_named_as_such(
    tmp_path: Path,
) -> None:
    approvals = signed_store(tmp_path)
    path = approvals.path(RUN, 1)
    path.parent.mkdir(parents=True)
    path.write_text(answer().model_dump_json())  # what earlier versions wrote
    with pytest.raises(ApprovalRefused) as refused:
        approvals.read(RUN, 1, verdict_sha256=DIGEST)
    assert refused.value.why == UNSIGNED_BEFORE
    path.write_text(answer(verdict_sha256=DIGEST).model_dump_json())  # not an old file
    with pytest.raises(ApprovalRefused, match="unsigned, though it names a verdict digest"):
        approvals.read(RUN, 1, verdict_sha256=DIGEST)


def test_a_file_that_is_not_an_approval_is_refused_not_raised_as_anything_else(
    tmp_path: Path,
) -> None:
    approvals = signed_store(tmp_path)
    path = approvals.path(RUN, 1)
    path.parent.mkdir(parents=True)
    path.write_text('{"approved": true, "by": "everyone"}')
    with pytest.raises(ApprovalRefused, match="does not read as an approval"):
        approvals.read(RUN, 1, verdict_sha256=DIGEST)


@pytest.mark.quick
def test_the_key_file_is_made_once_0600_outside_the_runs_and_shared(tmp_path: Path) -> None:
    storage = FileStorage(tmp_path)
    key_path = storage.layout.approval_key_path
    assert key_path == tmp_path / "keys" / "approval.key"
    keys = ApprovalKeys.of(key_path, {})
    assert keys.for_checking() is None and not key_path.exists()  # checking makes none
    signed = SignedApprovals(storage.approvals, keys).write(answer(), verdict_sha256=DIGEST)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path.parent.stat().st_mode) & 0o077 == 0
    assert [p.name for p in key_path.parent.iterdir()] == ["approval.key"]  # no temp left
    made = key_path.read_bytes()
    # A second process that also needs to sign finds the key and keeps it.
    again = ApprovalKeys.of(key_path, {})
    again.for_signing()
    assert key_path.read_bytes() == made
    assert signed_store(tmp_path).read(RUN, 1, verdict_sha256=DIGEST) == signed


def test_a_key_made_by_another_process_first_is_the_one_used(tmp_path: Path) -> None:
    """Two processes find no key and both make one: the second's link fails and it signs
    with the first's (here the first has made it between the second's look and make)."""
    from orchestrator.storage import approvals as module

    key_path = FileStorage(tmp_path).layout.approval_key_path
    module._make_key_file(key_path)
    first = key_path.read_bytes()
    module._make_key_file(key_path)  # the loser of the race
    assert key_path.read_bytes() == first
    assert sorted(p.name for p in key_path.parent.iterdir()) == ["approval.key"]


def test_the_key_never_shows(tmp_path: Path) -> None:
    key_path = FileStorage(tmp_path).layout.approval_key_path
    keys = ApprovalKeys.of(key_path, {})
    key = keys.for_signing()
    secret = key_path.read_text().strip()
    assert secret not in repr(key) and secret not in str(key) and secret not in repr(keys)
    assert repr(key) == "ApprovalKey(<hidden>)"
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(key)
    given = ApprovalKeys.of(key_path, {APPROVAL_KEY_ENV: "s3cret-from-the-environment"})
    assert "s3cret" not in repr(given) and "s3cret" not in repr(given.for_checking())


def test_a_key_in_the_environment_wins_and_no_file_is_made(tmp_path: Path) -> None:
    environ = {APPROVAL_KEY_ENV: "an operator's key, long enough"}
    approvals = signed_store(tmp_path, environ)
    approvals.write(answer(), verdict_sha256=DIGEST)
    assert not FileStorage(tmp_path).layout.approval_key_path.exists()
    assert signed_store(tmp_path, environ).read(RUN, 1, verdict_sha256=DIGEST) is not None
    # Without it, the file key is another key: the approval does not verify.
    with pytest.raises(ApprovalRefused, match="no approval key to check it with"):
        signed_store(tmp_path).read(RUN, 1, verdict_sha256=DIGEST)


@pytest.mark.parametrize("value", ["", "short"])
def test_an_empty_or_short_key_in_the_environment_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(StateError, match=f"\\${APPROVAL_KEY_ENV} is set but shorter"):
        ApprovalKeys.of(tmp_path / "approval.key", {APPROVAL_KEY_ENV: value})


def test_a_key_file_others_can_read_or_that_is_not_a_key_is_refused_without_its_content(
    tmp_path: Path,
) -> None:
    key_path = FileStorage(tmp_path).layout.approval_key_path
    ApprovalKeys.of(key_path, {}).for_signing()
    secret = key_path.read_text().strip()
    key_path.chmod(0o644)
    with pytest.raises(StateError, match="is open to other users") as opened:
        ApprovalKeys.of(key_path, {}).for_checking()
    assert secret not in str(opened.value)
    key_path.chmod(0o600)
    key_path.write_text("not hex at all " + secret[:10])
    with pytest.raises(StateError, match="is not a key") as garbled:
        ApprovalKeys.of(key_path, {}).for_signing()
    assert secret[:10] not in str(garbled.value)
    key_path.unlink()
    key_path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateError, match="cannot be read"):
        ApprovalKeys.of(key_path, {}).for_checking()


def test_the_hmac_covers_a_domain_so_a_key_used_elsewhere_cannot_be_replayed() -> None:
    from orchestrator.storage.approvals import signed_bytes

    body = signed_bytes(answer())
    assert body.startswith(b"orchestrator approval v1\n")
    assert b'"hmac"' not in body and b'"verdict_sha256":null' in body
    assert ApprovalKey(b"k" * 32).mac(body) != ApprovalKey(b"j" * 32).mac(body)
