"""Base checks on disk: keyed by repository, commit, check and a digest of how the check is
configured; a file that does not read back as its key's is no result at all."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.domain.config import CheckConfig
from orchestrator.domain.sandbox import SandboxOptions
from orchestrator.storage import BaseCheck, BaseCheckKey
from orchestrator.storage.base_checks import BaseCheckStore, check_digest

COMMIT = "a" * 40


def check(**options: object) -> CheckConfig:
    return CheckConfig.model_validate({"name": "tests", "command": ["make", "test"], **options})


def test_the_digest_follows_what_can_change_the_checks_answer_only() -> None:
    plain = check_digest(check(), SandboxOptions())
    assert plain == check_digest(check(on_red_base="compare"), SandboxOptions())
    assert plain != check_digest(check(command=["make", "check"]), SandboxOptions())
    assert plain != check_digest(check(timeout_s=5.0), SandboxOptions())
    assert plain != check_digest(check(), SandboxOptions(network=True))
    assert len(plain) == 16


def test_a_result_is_found_by_its_key_and_by_nothing_else(tmp_path: Path) -> None:
    store = BaseCheckStore(tmp_path)
    key = BaseCheckKey("/srv/cards.git", COMMIT, "tests", check_digest(check(), SandboxOptions()))
    assert store.load(key) is None
    result = BaseCheck(
        repository=key.repository, commit=key.commit, check=key.check, digest=key.digest,
        passed=False, exit_code=1, reading="token=sk-ant-api03-" + "x" * 40,
        log_path=str(store.log_path(key)), checked_at=datetime(2026, 12, 1, tzinfo=UTC),
    )  # fmt: skip
    path = store.save(result)
    assert path.parent == tmp_path / "base_checks" / path.parent.parent.name / COMMIT
    loaded = store.load(key)
    assert loaded is not None and not loaded.passed and loaded.exit_code == 1
    assert "sk-ant-api03" not in (loaded.reading or "")  # redacted as it is built
    assert store.load(key._replace(commit="b" * 40)) is None
    assert store.load(key._replace(digest="0" * 16)) is None
    # Another key's result moved here, or a torn file, is not an answer: run it again.
    path.write_text(path.read_text().replace('"tests"', '"lint"'))
    assert store.load(key) is None
    path.write_text("{")
    assert store.load(key) is None


def test_a_commit_that_is_not_an_object_name_is_no_directory(tmp_path: Path) -> None:
    store = BaseCheckStore(tmp_path)
    with pytest.raises(ValueError, match="not a commit"):
        store.path(BaseCheckKey("r", "../../etc", "tests", "0" * 16))
