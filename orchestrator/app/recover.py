"""What happens when an attempt fails: one decision, persisted, approved, carried out.

    gather facts ─► bundle (persisted) ─► RecoveryAgent.diagnose (the fixed graph; it
    persists nothing) ─► the decision persisted once: reply texts, verdict file (with
    its call transcript), ledger rows
    ─► approval: automatic when routed ``auto`` (or ``reject``: the safe fallback runs);
       otherwise the run waits in ``awaiting-approval`` for ``orchestrator approve|reject``.
       Every approval is signed and bound to the verdict file's bytes; one that does not
       verify, or that was there before it could have been given (before the run asked a
       person, or beside a decision only just taken), is refused: nothing it approved
       runs and the run stops ``needs-human`` (``approval_forged``)
    ─► substrate.apply(proposal, approval) ─► outcome on the run record

If the orchestrator dies here, resuming finds the decision persisted for that attempt and
carries it out without asking again (appending its ledger rows first if the kill came
before them: keyed by decision id, never twice); if none was persisted yet, it decides
again, answered from the journal of the replies the dead process had already had
(``journaled_calls``), so a call that returned is neither made nor charged twice. A
diagnosis charged before a call that never returned stays spent.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

from orchestrator.actions.budget import diagnoses_spent, infra_retries_spent
from orchestrator.app.answers import bound_answer
from orchestrator.app.approval_gate import answer_of, mismatch, needs_person, out_of_turn, refused
from orchestrator.app.investigation_tools import investigator_for
from orchestrator.app.journaled_calls import journaled_factory
from orchestrator.app.learning import learn
from orchestrator.app.ledger_link import LedgerLink
from orchestrator.app.playbook import load_playbook, store_for
from orchestrator.app.services import Services
from orchestrator.app.stores import approvals_of
from orchestrator.app.substrate import Effect, apply, code_stage_for
from orchestrator.domain.config import StageConfig
from orchestrator.domain.infra_wait import infra_window_start
from orchestrator.domain.lifecycle import HaltReason, RunState
from orchestrator.domain.proposals import Caps, RecoveryContext
from orchestrator.domain.runs import Attempt, RunRecord, VerdictRef
from orchestrator.execution.attempts import git_sandbox
from orchestrator.execution.git import hardened_git_env
from orchestrator.execution.process import CapturedHead, HeadRequest
from orchestrator.recovery.context import REDACTION_MARGIN_BYTES, build_bundle
from orchestrator.recovery.failure_reading import Diff, failure_reading
from orchestrator.recovery.graph import RecoveryAgent, fail_safe
from orchestrator.recovery.graph_state import GraphDeps, GraphState
from orchestrator.storage import Approval, CrashPoint, JournaledReply, VerdictRecord
from orchestrator.storage.approvals import AUTO
from orchestrator.storage.baselines import BaselineStore
from orchestrator.storage.budget import TicketBudget
from orchestrator.storage.call_journal import CallJournals
from orchestrator.storage.decisions import read_verdict
from orchestrator.storage.ledger import inputs_hash
from orchestrator.storage.transcripts import write_texts

DIFF_TIMEOUT_S = 60.0


def _read_diff(record: RunRecord, services: Services, max_bytes: int) -> CapturedHead:
    # Read through the executor (where every process starts), capped: a 100 MB diff costs
    # what the cap costs. Three dots: the branch's own changes since it left its base.
    # In the sandbox: git reads the clone's config, written by whoever wrote the clone.
    argv = ("git", "diff", "--no-color", "--no-ext-diff", "--no-textconv")
    env = {k: v for k, v in services.environ.items() if k in ("PATH", "HOME", "LANG")}
    request = HeadRequest(
        (*argv, f"origin/{record.base_branch}...HEAD"),
        cwd=Path(record.clone_dir),
        env=hardened_git_env(env),
        max_bytes=max_bytes,
        timeout_s=DIFF_TIMEOUT_S,
    )
    return git_sandbox(services, Path(record.clone_dir)).capture_head(request)


def recover(
    record: RunRecord, stage: StageConfig, attempt: Attempt, services: Services
) -> tuple[RunRecord, Effect]:
    """Decide what to do about ``attempt``'s failure and, once approved, do it."""
    # A decision the model provider's outage left undecided (issue 43) is decided again.
    ref = next(
        (v for v in record.verdicts if v.attempt == attempt.number and not v.model_unavailable),
        None,
    )
    fresh = ref is None  # decided in this call: nothing of ours has answered it yet
    # A person was asked about this decision: the run waits for their answer. It stays
    # ``awaiting-approval`` on disk until what the answer decided is carried out (the
    # outcome's save), so a crash in between still shows the question was put.
    asked = record.state is RunState.AWAITING_APPROVAL and ref is not None
    if fresh:
        # What the run's earlier decisions proved: a learned entry whose re-run failed
        # again is retired before the playbook is read, so this failure goes to the model.
        learn(record, services)
    if record.state is not RunState.RECOVERING and not asked:
        record = record.transition(RunState.RECOVERING, now=services.clock(), stage=stage.name)
        services.storage.runs.save(record, CrashPoint.RECOVERING)
    if ref is None:
        decided = _decide(record, stage, attempt, services)
        if isinstance(decided, Deferred):
            # Nothing decided, nothing charged: the run stays ``recovering`` and the next
            # run of it (the next batch) decides this failure afresh.
            services.reporter.note(f"deferred: {decided.reason}; the next batch decides it")
            return record, Effect(outcome=f"deferred: {decided.reason}", paused=True)
        record, ref = _referenced(record, attempt, decided, services)
    else:  # resumed: the decision was persisted before we stopped
        decided = _with_rows(read_verdict(Path(ref.path)), services)
    approved = _approve(record, stage, ref, decided, services, asked=asked, fresh=fresh)
    if not isinstance(approved, Approved):
        return approved
    return _carry_out(record, stage, approved, services)


def _referenced(
    record: RunRecord, attempt: Attempt, decided: VerdictRecord, services: Services
) -> tuple[RunRecord, VerdictRef]:
    """The run record points at the decision just persisted (and counts its diagnosis)."""
    store = services.storage.runs
    _, decided_sha256 = services.storage.decisions.read_with_sha256(record.run_id, decided.number)
    ref = VerdictRef(
        number=decided.number, attempt=attempt.number, source=decided.source,
        action=decided.action, path=str(store.verdict_path(record.run_id, decided.number)),
        sha256=decided_sha256, model_unavailable=_model_unavailable(decided),
    )  # fmt: skip
    record = record.with_verdict(ref)
    if decided.usage.calls and not ref.model_unavailable:
        counters = record.counters.model_copy(update={"diagnoses": record.counters.diagnoses + 1})
        record = record.model_copy(update={"counters": counters})
    store.save(record, CrashPoint.VERDICT_REF)
    services.reporter.note(
        f"verdict {decided.number} ({decided.source}): {decided.action} — {decided.reason}"
    )
    return record, ref


@dataclass(frozen=True)
class Approved:
    """The decision as persisted (read with its digest) and the approval bound to it."""

    decided: VerdictRecord
    approval: Approval


def _approve(
    record: RunRecord,
    stage: StageConfig,
    ref: VerdictRef,
    decided: VerdictRecord,
    services: Services,
    *,
    asked: bool,
    fresh: bool,
) -> Approved | tuple[RunRecord, Effect]:
    """The decision's approval: given (and verified), automatic, or asked of a person
    (the run waits); or the run stops, nothing run, when what is found does not verify."""
    approvals = approvals_of(services)
    answered = approvals.answered(record.run_id, decided.number)
    if not answered and needs_person(decided.proposal.routing):
        if not asked:
            record = record.transition(RunState.AWAITING_APPROVAL, now=services.clock())
            services.storage.runs.save(record, CrashPoint.AWAITING_APPROVAL)
        services.reporter.note(
            f"{decided.proposal.routing}: confidence {decided.proposal.confidence}; the "
            f"proposal is in {ref.path}; answer with `orchestrator approve {record.run_id}` "
            f"or `orchestrator reject {record.run_id} --reason ...`"
        )
        return record, Effect(outcome="awaiting approval", paused=True)
    # Carried out as persisted: an approval is bound to the file's bytes.
    decided, digest = services.storage.decisions.read_with_sha256(record.run_id, ref.number)
    proposal = decided.proposal
    if not answered:
        changed = ref.changed(digest)
        if changed is not None:
            return refused(record, stage, ref, decided, f"{ref.path}: {changed}", services)
        automatic = bound_answer(services, record.run_id, decided, digest, approved=True, by=AUTO)
        return Approved(decided, automatic)
    found = answer_of(approvals, record.run_id, ref.number, digest)
    why = out_of_turn(person=needs_person(proposal.routing), asked=asked, fresh=fresh)
    if why is not None and isinstance(found, Approval):
        # Signed with the key, yet there before it could have been given.
        why += "; it verifies, so the approval key may have leaked: replace it"
    elif why is None:
        why = (found if isinstance(found, str) else mismatch(found, proposal)) or (
            ref.changed(digest)  # an answer signed for a file changed since the decision
        )
    if why is not None or not isinstance(found, Approval):
        where = approvals.path(record.run_id, ref.number)
        return refused(record, stage, ref, decided, f"{where}: {why}", services)
    return Approved(decided, found)


def _carry_out(
    record: RunRecord, stage: StageConfig, approved: Approved, services: Services
) -> tuple[RunRecord, Effect]:
    """Do what was approved; its outcome goes on the verdict's reference and the ledger."""
    proposal = approved.decided.proposal
    record, effect = apply(record, proposal, approved.approval, services)
    ts = services.clock().isoformat()
    ref = next(v for v in record.verdicts if v.number == approved.decided.number)
    record = record.with_verdict(ref.model_copy(update={"outcome": effect.outcome}))
    now = services.clock()
    if effect.terminal is not None:
        record = record.transition(effect.terminal, now=now, halt=effect.halt, stage=stage.name)
    else:
        record = record.transition(RunState.RUNNING, now=now, stage=effect.resume_at)
    LedgerLink.for_services(services).outcome(proposal, effect.outcome, ts=ts)
    services.storage.runs.save(record, CrashPoint.OUTCOME)
    # A mechanical fix is green or red now: proposed, or its learned entry retired.
    learn(record, services)
    return record, effect


def _with_rows(decided: VerdictRecord, services: Services) -> VerdictRecord:
    """A decision persisted before we stopped, its ledger rows appended now, once, if a
    kill lost them (a file written before decisions kept their inputs cannot be rebuilt:
    its row stays missing, and the outcome reports it)."""
    LedgerLink.for_services(services).record_verdict(decided, ts=services.clock().isoformat())
    return decided


def _model_unavailable(decided: VerdictRecord) -> bool:
    """The model provider's outage failed the decision's call: the run waits
    (``waiting-infra``) and a later run decides the failure again (issue 43)."""
    return decided.source == "model" and decided.halt == HaltReason.INFRA_UNAVAILABLE.value


def decision_id_of(run_id: str, attempt: int, number: int) -> str:
    """The id of a run's decision ``number`` about ``attempt``: its charges' keys begin so."""
    return f"{run_id}:attempt-{attempt}:verdict-{number}"


@dataclass(frozen=True)
class Deferred:
    """No decision now: the model may not be asked yet (a spent batch budget)."""

    reason: str


def _decide(
    record: RunRecord, stage: StageConfig, attempt: Attempt, services: Services
) -> VerdictRecord | Deferred:
    """Gather the context, run the agent, persist its decision (reply texts, verdict file,
    ledger rows) and return it: what is returned is what was persisted, and nothing
    decided has run yet."""
    verdict_path = services.storage.runs.verdict_path(record.run_id, len(record.verdicts) + 1)
    if verdict_path.exists():
        # Redelivery: we died after the decision was persisted but before the run record
        # pointed at it. The decision stands; the model is not asked again.
        persisted = read_verdict(verdict_path)
        if persisted.attempt == attempt.number:
            return _with_rows(persisted, services)
    budget = services.storage.budgets.load(record.ticket_id)
    recovery = services.loaded.config.recovery
    # Diagnoses the model provider's outage failed do not count (issue 43), nor an
    # outage's retries that an earlier batch waited out.
    unavailable = (
        decision_id_of(record.run_id, v.attempt, v.number)
        for v in record.verdicts
        if v.model_unavailable
    )
    caps = Caps(
        diagnoses_used=diagnoses_spent(budget, unavailable),
        max_diagnoses=recovery.max_diag_invocations_per_ticket,
        infra_retries_used=infra_retries_spent(budget, infra_window_start(record)),
        max_infra_retries=recovery.max_infra_retries_per_ticket,
    )
    ctx = _recovery_context(record, stage, attempt, services, caps)
    return _diagnose(ctx, record, budget, services)


def _recovery_context(
    record: RunRecord, stage: StageConfig, attempt: Attempt, services: Services, caps: Caps
) -> RecoveryContext:
    """Everything the decision taken now may look at; its evidence bundle written first."""
    config, number = services.loaded.config, len(record.verdicts) + 1
    clone_exists = (Path(record.clone_dir) / ".git").exists()
    diff = None
    if clone_exists:
        # A margin past the cap, so a secret crossing the cut is redacted whole before
        # build_bundle cuts it to size.
        margin = config.recovery.context.max_diff_bytes + REDACTION_MARGIN_BYTES
        captured = _read_diff(record, services, margin)
        diff = Diff(captured.data, captured.truncated, captured.error)
    state_dir = services.storage.runs.state_dir
    baselines = BaselineStore(state_dir, warn=services.reporter.note)
    read = failure_reading(
        record, stage, attempt, code_stage=code_stage_for(config, stage), config=config,
        diff=diff, state_dir=state_dir, config_root=services.loaded.root, baseline_of=baselines.load,
    )  # fmt: skip
    bundle = build_bundle(read.bundle, config.recovery.context)
    bundle_json = bundle.model_dump_json(indent=1)
    bundle_path = services.storage.runs.write_bundle(record.run_id, number, bundle_json)
    # The promoted playbook entry that knows the failure's signature, if one does: kept in
    # the inputs, so replay decides the same (issue 44).
    playbook = load_playbook(store_for(services.loaded.root), services.reporter.note)
    link = LedgerLink.for_services(services)
    return RecoveryContext(
        decision_id=decision_id_of(record.run_id, attempt.number, number),
        ticket_id=record.ticket_id, run_id=record.run_id, attempt=attempt.number,
        signature=read.signature, decision=read.decision, failure=read.failure,
        facts=read.facts, bundle_text=bundle.render(), bundle_path=str(bundle_path),
        inputs_hash=inputs_hash(bundle_json), clone_exists=clone_exists, caps=caps,
        history=link.recent_history(read.signature, now=services.clock()),
        failure_signature=read.deciding,
        known=playbook.match(read.failure, read.deciding, stage=stage.name),
    )  # fmt: skip


def _diagnose(
    ctx: RecoveryContext, record: RunRecord, budget: TicketBudget, services: Services
) -> VerdictRecord | Deferred:
    """Run the agent on ``ctx`` and persist what it decided (``Deferred``: nothing)."""
    config, store, number = services.loaded.config, services.storage.runs, len(record.verdicts) + 1
    investigate = investigator_for(config, services, Path(record.clone_dir))  # its tools
    charges = 0

    def charge() -> None:
        nonlocal charges
        charges += 1
        key = f"{ctx.decision_id}:diagnosis-{budget.spent('diagnosis') + charges}"
        services.storage.budgets.charge(
            record.ticket_id, "diagnosis", key, run_id=record.run_id, at=services.clock()
        )

    # Every gateway the decision is handed (diagnosis, investigation, judge) is charged to
    # the ticket's diagnosis cap, and persisted, before its first call; each reply is
    # journaled as it comes, and a decision resumed after a kill is answered from the
    # journal rather than asking (and paying) again.
    journals = CallJournals(store.state_dir)
    recorded = deque(journals.load(record.run_id, number, ctx.decision_id))

    def journal(reply: JournaledReply) -> None:
        journals.append(record.run_id, number, ctx.decision_id, reply)

    charged = journaled_factory(services.gateway_factory, recorded, charge, journal)
    deps = GraphDeps.from_config(
        config, gateway_factory=charged, judge_factory=charged, investigate=investigate
    )

    def persist(state: GraphState) -> VerdictRecord:
        decided = VerdictRecord(
            number=number, created_at=services.clock(), **dict(state.require_memory())
        )
        # The agent's audit memory, then its ledger entries, before anything decided runs;
        # the texts first, so a verdict file never references a text that is not there.
        write_texts(store.layout.replies_dir(record.run_id), state.transcript.texts)
        services.storage.decisions.write(decided)
        LedgerLink.for_services(services).record_decision(
            state.ledger_entries, ts=services.clock().isoformat()
        )
        journals.discard(record.run_id, number)  # the verdict file says it all now
        return decided

    try:
        state = RecoveryAgent(deps).diagnose(ctx)
        deferred = state.require_decision().deferred
        if deferred is not None and charges == 0:
            return Deferred(deferred)
        return persist(state)
    except Exception as exc:
        if store.verdict_path(record.run_id, number).exists():  # persisted before it failed
            raise
        # Without this the run would stay in ``recovering``, and every re-run would charge
        # another diagnosis and fail the same way. What was charged stays charged; the
        # verdict file written now is what a re-run finds.
        why = f"recovery failed while deciding ({_one_line(exc)}): a person must look"
        return persist(fail_safe(ctx, why, charges, deps.thresholds))


def _one_line(exc: BaseException) -> str:
    try:
        said = str(exc).strip().splitlines()
    except Exception:  # noqa: BLE001 -- an exception whose text cannot be made
        said = []
    return f"{type(exc).__name__}: {said[0][:300]}" if said else type(exc).__name__
