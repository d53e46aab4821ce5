"""Exhausted resources and the network get deterministic verdicts, routed by rule: no
model is built, asked or charged, and the reason names what was recognised."""

from __future__ import annotations

from pathlib import Path

from recovery.test_graph import context, deps

from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.proposals import Caps, Failure, Source
from orchestrator.recovery.diagnose import precheck
from orchestrator.recovery.graph import run_graph

from support.recovery_fixtures import decision_context

DISK = "the disk is full (ENOSPC) [disk-full]: OSError: [Errno 28] No space left on device"
DNS = "a host name could not be resolved (DNS) [dns]: Could not resolve host: pypi.org"


def failure(infra: str, detail: str) -> Failure:
    return Failure(
        check="project-tests", output="", ticket_title="t", infra=infra, infra_detail=detail
    )


class CountingFactory:
    def __init__(self) -> None:
        self.built = 0

    def __call__(self) -> None:
        self.built += 1


def test_a_full_disk_goes_to_a_person_with_what_was_recognised(tmp_path: Path) -> None:
    factory = CountingFactory()
    ctx = context(tmp_path, failure=failure("resource_exhausted", DISK))
    state = run_graph(ctx, deps(gateway_factory=factory))
    proposal = state.require_proposal()
    assert (proposal.action.action, proposal.routing) == ("abandon-human", "auto")
    assert factory.built == 0 and state.transcript.entries == ()
    decision = precheck(
        ctx=decision_context(tmp_path), failure=failure("resource_exhausted", DISK),
        clone_exists=True, caps=Caps(diagnoses_used=0, max_diagnoses=2),
    )  # fmt: skip
    assert decision is not None and decision.source is Source.INFRA
    assert decision.halt is HaltReason.RESOURCE_EXHAUSTED
    assert decision.reason == (
        f"infrastructure failure (resource_exhausted: {DISK}): a person must free disk, "
        "quota or memory on this machine, then `orchestrator resume` the run; retrying "
        "cannot help"
    )
    assert decision.usage.calls == 0


def test_a_network_failure_is_retried_after_a_back_off_under_the_infra_cap(
    tmp_path: Path,
) -> None:
    factory = CountingFactory()
    ctx = context(tmp_path, failure=failure("network", DNS))
    state = run_graph(ctx, deps(gateway_factory=factory))
    proposal = state.require_proposal()
    assert (proposal.action.action, proposal.routing) == ("retry", "auto")
    assert "routed by rule" in proposal.reasoning[3]
    assert factory.built == 0
    decision = precheck(
        ctx=decision_context(tmp_path), failure=failure("network", DNS), clone_exists=True,
        caps=Caps(diagnoses_used=0, max_diagnoses=2),
    )  # fmt: skip
    assert decision is not None
    assert decision.reason == f"infrastructure failure (network: {DNS}): retry after a back-off"
    # The infra cap spent: a stop, still without a model.
    spent = precheck(
        ctx=decision_context(tmp_path), failure=failure("network", DNS), clone_exists=True,
        caps=Caps(
            diagnoses_used=0, max_diagnoses=2, infra_retries_used=3, max_infra_retries=3
        ),
    )  # fmt: skip
    # The back-off spent on the network (the world's failure): the run waits for the next
    # batch (issue 43), still without a model; a crashed engine (the ticket's own) stops.
    assert spent is not None and spent.halt is HaltReason.INFRA_UNAVAILABLE
    assert spent.verdict.action == "abandon-human" and spent.usage.calls == 0
    assert spent.reason == (
        f"infrastructure failure (network: {DNS}) through this batch's back-off (3/3 "
        "retries): waiting for the next batch"
    )
    crashed = precheck(
        ctx=decision_context(tmp_path), failure=failure("engine_error", "segfault"),
        clone_exists=True,
        caps=Caps(
            diagnoses_used=0, max_diagnoses=2, infra_retries_used=3, max_infra_retries=3
        ),
    )  # fmt: skip
    assert crashed is not None and crashed.halt is HaltReason.CAP_EXHAUSTED
    assert "infrastructure retries spent (3/3 for this ticket)" in crashed.reason
