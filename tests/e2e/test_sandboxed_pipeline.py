"""The demo pipeline as shipped, every stage and check in the sandbox (the default), under
the real bwrap: the tickets end as they always have — CARDS-1 through its playbook
recipe (itself sandboxed, its verifier too), CARDS-2 first time — and every attempt and
check records that it ran sandboxed. The demo lives under /tmp here, so this also proves
what a stage must read (the run's ticket, the origin) stays visible through the
sandbox's private /tmp."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.demo.run import build_demo
from orchestrator.domain.lifecycle import RunState
from orchestrator.execution.attempts import Services
from orchestrator.recovery.gateway import ScriptedGateway
from orchestrator.storage.runs import RunStore

from conftest import ROOT
from harness import Harness
from sandbox_required import require_sandbox


def shipped_config(dest: Path) -> Path:
    text = (ROOT / "config.toml").read_text()
    assert 'sandbox = "none"\n' not in text.replace('# sandbox = "none"', "")
    dest.write_text(text)
    return dest


@pytest.mark.quick
@pytest.mark.slow
def test_the_demo_tickets_complete_with_their_stages_sandboxed(tmp_path: Path) -> None:
    require_sandbox()
    layout = build_demo(tmp_path / "demo")
    h = Harness(shipped_config(tmp_path / "config.toml"), ScriptedGateway([]))
    h.services = Services(**{**h.services.__dict__, "store": RunStore(tmp_path / "state")})
    for ticket in ("CARDS-1", "CARDS-2"):
        record = h.run(layout.tickets[ticket])
        assert record.state is RunState.COMPLETED, (ticket, h.out.getvalue())
        review = next(a for a in reversed(record.attempts) if a.stage == "review")
        assert review.log_path is not None
        # The check ran inside bwrap: the log's header says so beside the command.
        assert "    # sandbox: bwrap, no network, writable: " in Path(review.log_path).read_text()
        for attempt in record.attempts:
            if attempt.checks:
                assert {c.sandbox for c in attempt.checks if not c.skipped} == {"bwrap"}
            else:
                assert attempt.sandbox == "bwrap", attempt.stage
