"""The driver checks a clone before anything of ours works in it again: before each stage
that runs in it and before each decision about a failure. A ``.git`` that is not the
clone's own directory, or a config only an attacker writes, stops the run needs-human
(precondition_failed), before any git call, model consultation or recipe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.app.driver import run_ticket
from orchestrator.domain.config import load_config
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.runs import RunRecord
from orchestrator.domain.tickets import load_ticket
from orchestrator.recovery.gateway import ModelGateway

from conftest import bash_stage, write_config, write_ticket
from support.services import make_services

# The stage that makes the clone, as the clone stage would (cwd = run), and then:
MAKE_CLONE = (
    'git init -q "$ORCH_CLONE_DIR" && git -C "$ORCH_CLONE_DIR" commit -q --allow-empty -m base'
)
# ...the clone's .git swapped for a gitdir: file naming another repository.
GIT_FILE = (
    f'{MAKE_CLONE} && mv "$ORCH_CLONE_DIR/.git" "$ORCH_RUN_DIR/elsewhere" && '
    'echo "gitdir: $ORCH_RUN_DIR/elsewhere" > "$ORCH_CLONE_DIR/.git"'
)
# ...or a push redirected by its config.
PUSH_URL = f'{MAKE_CLONE} && git -C "$ORCH_CLONE_DIR" config remote.origin.pushurl /tmp/elsewhere'
IDENTITY = {
    "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@x",
}  # fmt: skip


def in_clone(name: str, script: str) -> str:
    return bash_stage(name, script).replace('cwd = "run"', 'cwd = "clone"')


def no_model() -> ModelGateway:
    pytest.fail("the model was consulted about a clone that cannot be trusted")


def run(tmp_path: Path, stages: str, *, recovery: bool = False) -> RunRecord:
    config = write_config(tmp_path, stages, recovery=recovery)
    loaded = load_config(config)
    services = make_services(
        loaded,
        loaded.root / loaded.config.state_dir,
        environ={"PATH": os.environ["PATH"], "HOME": str(tmp_path), **IDENTITY},
        gateway_factory=no_model,
    )
    return run_ticket(load_ticket(write_ticket(tmp_path / "t")), services)


def review_ran(record: RunRecord) -> bool:
    return (Path(record.clone_dir) / "review-ran").exists()


# Writes where a stage in the clone may write, sandboxed or not: the clone.
REVIEW = in_clone("review", "touch review-ran")


def test_a_sound_clone_goes_on(tmp_path: Path) -> None:
    record = run(tmp_path, bash_stage("make", MAKE_CLONE) + REVIEW)
    assert record.state is RunState.COMPLETED and review_ran(record)


def test_a_git_file_stops_the_run_before_the_next_stage_in_the_clone(tmp_path: Path) -> None:
    record = run(tmp_path, bash_stage("make", GIT_FILE) + REVIEW)
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.PRECONDITION_FAILED
    clone = Path(record.clone_dir)
    assert record.halt.stage == "review"
    assert record.halt.detail == (
        f"the clone {clone} cannot be trusted: {clone / '.git'} is a file (a gitdir: link "
        "to another repository), not a directory; nothing more ran in it. A person must "
        f"look at it, then `orchestrator resume {record.run_id}`"
    )
    assert not review_ran(record)


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (GIT_FILE, "is a file (a gitdir: link to another repository)"),
        (PUSH_URL, "remote.origin.pushurl (sends a push somewhere other than"),
    ],
    ids=["gitdir-file", "pushurl"],
)
def test_a_failure_in_an_untrusted_clone_is_not_taken_to_the_model(
    tmp_path: Path, script: str, said: str
) -> None:
    record = run(tmp_path, bash_stage("make", f"{script} && exit 3") + REVIEW, recovery=True)
    assert record.state is RunState.NEEDS_HUMAN
    assert record.halt is not None and record.halt.reason is HaltReason.PRECONDITION_FAILED
    assert record.halt.stage == "make" and said in record.halt.detail
    assert record.verdicts == () and record.counters.diagnoses == 0  # nothing decided
    assert not review_ran(record)
