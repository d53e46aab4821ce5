"""split: the ticket bundles independent concerns. Each sub-ticket is written as a
ticket file beside the parent (linked by ``parent``); the parent ends ``split``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, PlanFacts
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.lifecycle import RunState
from orchestrator.domain.tickets import TicketFields, render_ticket
from orchestrator.domain.verdicts import SplitVerdict

if TYPE_CHECKING:
    from orchestrator.domain.runs import RunRecord
    from orchestrator.execution.attempts import StageServices


def plan(verdict: SplitVerdict, facts: PlanFacts) -> Dispatch:
    return Dispatch(
        verdict.action, facts.approval, terminal=RunState.SPLIT.value,
        sub_tickets=tuple(s.title for s in verdict.sub_tickets),
    )  # fmt: skip


def sub_ticket_texts(
    record: RunRecord, verdict: SplitVerdict, number: int
) -> list[tuple[str, str]]:
    """(sub-ticket id, file text) for each sub-ticket, in order. Pure."""
    texts = []
    for index, sub in enumerate(verdict.sub_tickets, start=1):
        sub_id = f"{record.ticket_id}.{index}"
        fields = TicketFields.model_validate(
            {
                "id": sub_id,
                "title": sub.title,
                "kind": record.ticket_kind,
                "repository": record.repository,
                "base_branch": record.base_branch,
                "parent": record.ticket_id,
            }
        )
        body = (
            f"{sub.body}\n\n(Split from {record.ticket_id} by run {record.run_id}, verdict "
            f"{number}: {verdict.summary})"
        )
        texts.append((sub_id, render_ticket(fields, body)))
    return texts


def apply(
    record: RunRecord, applying: DecisionToApply, plan: Dispatch, services: StageServices
) -> tuple[RunRecord, Effect]:
    from pathlib import Path

    from orchestrator.storage.ticket_queue import write_sub_ticket

    verdict = applying.verdict
    assert isinstance(verdict, SplitVerdict)  # the plan was made from this verdict
    directory = Path(record.ticket_path).parent
    written = [
        str(write_sub_ticket(directory, sub_id, text, run_id=record.run_id))
        for sub_id, text in sub_ticket_texts(record, verdict, applying.number)
    ]
    record = record.model_copy(update={"sub_tickets": tuple(written)})
    return record, Effect(outcome=f"split into {len(written)} sub-tickets", terminal=RunState.SPLIT)


SPEC: ActionSteps[SplitVerdict] = ActionSteps(name="split", plan=plan, apply=apply)
