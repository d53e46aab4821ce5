"""The demo pipeline with every stage but the pull request sandboxed (clone, the coding
engine, both review checks), under the real bwrap: the tickets end as they do without
the sandbox — CARDS-1 through its playbook recipe (itself sandboxed), CARDS-2 first
time. The demo lives under /tmp here, so this also proves what a stage must read (the
run's ticket, the origin) stays visible through the sandbox's private /tmp."""

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


def sandboxed_config(dest: Path) -> Path:
    text = (ROOT / "config.toml").read_text()
    for name in ('name = "clone"\n', 'name = "implement"\n', 'name = "review"\n'):
        assert text.count(name) == 1, name
        text = text.replace(name, name + "sandbox = true\n")
    dest.write_text(text)
    return dest


@pytest.mark.quick
@pytest.mark.slow
def test_the_demo_tickets_complete_with_their_stages_sandboxed(tmp_path: Path) -> None:
    require_sandbox()
    layout = build_demo(tmp_path / "demo")
    h = Harness(sandboxed_config(tmp_path / "config.toml"), ScriptedGateway([]))
    h.services = Services(**{**h.services.__dict__, "store": RunStore(tmp_path / "state")})
    for ticket in ("CARDS-1", "CARDS-2"):
        record = h.run(layout.tickets[ticket])
        assert record.state is RunState.COMPLETED, (ticket, h.out.getvalue())
        review = next(a for a in reversed(record.attempts) if a.stage == "review")
        assert review.log_path is not None
        # The check ran inside bwrap: the log's header says so beside the command.
        assert "    # sandbox: bwrap, no network, writable: " in Path(review.log_path).read_text()
