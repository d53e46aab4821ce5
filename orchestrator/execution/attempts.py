"""One attempt of one stage (or one check), persisted at start, once its process group
exists, and at its end. Used by the driver's loop and by the substrate (which re-runs a
failing check as the verifier), so both run a check the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from orchestrator.domain.config import CheckConfig, LoadedConfig, PriceConfig, StageConfig
from orchestrator.domain.egress import network_access
from orchestrator.domain.runs import (
    Attempt,
    AttemptStatus,
    CheckResult,
    FailingCheck,
    RunRecord,
    attempt_finished,
    attempt_started,
    engine_and_model,
    interrupted,
)
from orchestrator.domain.sandbox import SandboxOptions, effective_sandbox
from orchestrator.domain.stage_hosts import check_network, egress_hosts, forge_urls, stage_network
from orchestrator.engines.base import NO_USAGE, EngineReport
from orchestrator.execution import runner
from orchestrator.execution.against_base import judged_against_base
from orchestrator.execution.engine_stage import EngineOutcome, run_engine
from orchestrator.execution.executor import Executor
from orchestrator.execution.feedback import engine_feedback
from orchestrator.execution.process import ProcessRequest
from orchestrator.execution.reporter import Handoffs, Reporter
from orchestrator.execution.sandbox import BwrapLocator, SandboxedExecutor, SandboxSpec
from orchestrator.execution.stage_egress import denial_fields, warn_at_start, with_denials
from orchestrator.execution.stage_env import StageContext, expand_command, stage_environ
from orchestrator.execution.stage_sandbox import (
    Role,
    RunPlaces,
    config_files,
    git_profile,
    global_identity,
    home_of,
    profile,
    secret_files,
)
from orchestrator.reading.failure import read_failure
from orchestrator.redaction import redact
from orchestrator.storage import CrashPoint
from orchestrator.storage.layout import StateLayout, verdict_files

if TYPE_CHECKING:
    from orchestrator.storage import Runs, Storage


class GreenRecorder(Protocol):
    """Learns from the log of a check that passed (``storage.baselines.BaselineStore``):
    the baseline a failing log of that check in that repository is read against."""

    def __call__(
        self, repo: str, check: str, log: Path, *, warn: Callable[[str], None] | None = None
    ) -> None: ...


class StageServices(Protocol):
    """What running a stage or a check takes (``app.services.Services`` is one): the
    config, the run store, the reporter and hand-offs, the clock, where processes start."""

    @property
    def loaded(self) -> LoadedConfig: ...

    @property
    def storage(self) -> Storage: ...

    @property
    def reporter(self) -> Reporter: ...

    @property
    def handoffs(self) -> Handoffs: ...

    @property
    def environ(self) -> Mapping[str, str]: ...

    @property
    def clock(self) -> Callable[[], datetime]: ...

    @property
    def executor(self) -> Executor: ...

    @property
    def tick_s(self) -> float: ...

    @property
    def locate_bwrap(self) -> BwrapLocator: ...

    @property
    def record_green(self) -> GreenRecorder | None: ...


@dataclass(frozen=True)
class SandboxHost:
    """What building a sandbox takes of the services: the preflight builds one without
    a run's stores (``SandboxHost.of`` takes it from a run's)."""

    loaded: LoadedConfig
    state_dir: Path
    environ: Mapping[str, str]
    executor: Executor
    locate_bwrap: BwrapLocator

    @classmethod
    def of(cls, services: StageServices | SandboxHost) -> SandboxHost:
        if isinstance(services, SandboxHost):
            return services
        return cls(services.loaded, services.storage.runs.state_dir, services.environ,
                   services.executor, services.locate_bwrap)  # fmt: skip


def sandboxed(
    services: StageServices | SandboxHost,
    options: SandboxOptions,
    *,
    cwd: Path,
    ctx: StageContext,
    role: Role = "stage",
    side_effectful: bool = False,
    command: tuple[str, ...] = (),
    egress_hosts: tuple[str, ...] = (),
    egress_denied: dict[str, int] | None = None,
) -> Executor:
    """The executor a stage, an engine or a check (``role``) runs through: inside the one
    sandbox profile (``stage_sandbox.profile``), unless its config says ``sandbox =
    "none"``. When the sandbox cannot start here, nothing runs (exit 126, with why).
    ``command``: its configured command, unexpanded: the files it names under ``{root}``
    are the only ones of the config's directory it is shown."""
    if options.sandbox == "none":
        return services.executor
    host = SandboxHost.of(services)
    spec = sandbox_spec(
        host, options, cwd=cwd, ctx=ctx, role=role, side_effectful=side_effectful,
        command=command, egress_hosts=egress_hosts,
    )  # fmt: skip
    for path in spec.writable:
        # A missing one in the clone or beside the config is made, as a build would make
        # it; elsewhere (the home: ~/.claude.json is a file) it must exist, and bwrap
        # says which one it cannot bind.
        if path.is_relative_to(cwd) or path.is_relative_to(host.loaded.root):
            with contextlib.suppress(OSError):
                path.mkdir(parents=True, exist_ok=True)
    # ``egress_hosts``: what it reaches besides its own ``egress`` (``stage_hosts``);
    # ``egress_denied`` collects what its proxy refused.
    return SandboxedExecutor(
        host.executor, spec, locate=host.locate_bwrap, egress_denied=egress_denied
    )


def sandbox_spec(
    host: SandboxHost,
    options: SandboxOptions,
    *,
    cwd: Path,
    ctx: StageContext,
    role: Role = "stage",
    side_effectful: bool = False,
    command: tuple[str, ...] = (),
    egress_hosts: tuple[str, ...] = (),
) -> SandboxSpec:
    """The sandbox ``sandboxed`` runs in, built and nothing else (no directory made):
    the preflight reads what it will show."""
    # The paths a config declares may use the command placeholders ({root}, {clone},
    # {run_dir}) and ``~/``.
    root = host.loaded.root
    named = config_files(command, root)  # what of the config's directory it is shown
    options = options.model_copy(
        update={
            "writable": expand_command(options.writable, root=root, ctx=ctx),
            "readable": expand_command(options.readable, root=root, ctx=ctx),
        }
    )
    layout = StateLayout.of_run_dir(ctx.run_dir)
    places = RunPlaces(
        state_dir=host.state_dir,
        run_dir=ctx.run_dir,
        clone=layout.clone_dir(ctx.run_id),
        ticket_dir=ctx.ticket_file.parent,
        repository=ctx.repository,
        config_root=root,
        home=home_of(host.environ),
        decisions=tuple(f.path for f in verdict_files(layout.runs_dir, run_id=ctx.run_id))
        if side_effectful
        else (),
        secrets=secrets_of(host),
    )
    access = network_access(
        options.network, engine=role == "engine", declared=options.egress, implied=egress_hosts
    )
    return profile(
        options, role, cwd=cwd, places=places, limits=host.loaded.config.sandbox, access=access,
        identity=global_identity(host.executor, host.environ), side_effectful=side_effectful,
        named=named,
    )  # fmt: skip


def secrets_of(services: StageServices | SandboxHost) -> tuple[Path, ...]:
    """The files holding a secret that no sandbox of this run may show
    (``stage_sandbox.secret_files``)."""
    host = SandboxHost.of(services)
    loaded = host.loaded
    return secret_files(
        loaded.root,
        StateLayout(host.state_dir).approval_key_path,
        home_of(services.environ),
        services.environ,
        # The fleet's signing key (beside the config unless [distributed] moves it).
        also=(loaded.path.parent / loaded.config.distributed.fleet_key,),
    )


def git_sandbox(services: StageServices, clone: Path, *, writes: bool = False) -> Executor:
    """The executor for the orchestrator's own git calls in ``clone`` (status, diff, log,
    worktree, reset, clean): git reads a config the clone's owner wrote, so whatever it
    might be made to run runs here, with no network, nothing of the state dir but this
    clone, and the clone itself writable only for a call that ``writes`` (its verification
    checkout beside it too). ``[sandbox] git = "none"`` opts out."""
    if services.loaded.config.sandbox.git == "none":
        return services.executor
    spec = git_profile(
        clone,
        writes=writes,
        state_dir=services.storage.runs.state_dir,
        home=home_of(services.environ),
        limits=services.loaded.config.sandbox,
        config_root=services.loaded.root,
        secrets=secrets_of(services),
    )
    return SandboxedExecutor(services.executor, spec, locate=services.locate_bwrap)


def sandbox_mode(options: SandboxOptions) -> str:
    return "none" if options.sandbox == "none" else "bwrap"


def stage_context(
    record: RunRecord, stage: str, engine: str, model: str, attempt: int, store: Runs
) -> StageContext:
    # The ticket's and the run's ids and names, as the record has them.
    named = record.model_dump(
        include={"ticket_id", "ticket_kind", "repository", "base_branch", "run_id"}
    )
    return StageContext(
        ticket_file=Path(record.ticket_snapshot), run_dir=Path(record.run_dir),
        clone_dir=Path(record.clone_dir), state_dir=store.state_dir, stage=stage, engine=engine,
        model=model, attempt=attempt, base_commit=record.base_commit or "", **named,
    )  # fmt: skip


def run_check(
    check: CheckConfig,
    stage: StageConfig,
    ctx: StageContext,
    cwd: Path,
    log_path: Path,
    services: StageServices,
    on_start: Callable[[runner.ProcessIdentity], None] | None = None,
) -> CheckResult:
    """Run one check exactly as configured (the trusted command, never a verdict's)."""
    check_ctx = replace(ctx, check=check.name)
    argv = expand_command(check.command, root=services.loaded.root, ctx=check_ctx)
    label = f"{stage.name}:{check.name}"
    options = effective_sandbox(check, stage)
    access = check_network(options)
    warn_at_start(services.reporter, f"check {label}", options, access)
    denied: dict[str, int] = {}  # what the egress proxy refuses it
    executor = sandboxed(
        services, options, cwd=cwd, ctx=ctx, role="check", command=check.command,
        egress_denied=denied,
    )  # fmt: skip
    outcome = executor.run(
        ProcessRequest(
            argv,
            cwd=cwd,
            env=stage_environ(services.environ, check_ctx, stage.pass_env),
            log_path=log_path,
            timeout_s=check.timeout_s,
            kill_after_s=stage.kill_after_s,
            on_start=on_start,
            on_tick=lambda elapsed: services.reporter.tick(label, elapsed),
            tick_s=services.tick_s,
            max_log_bytes=services.loaded.config.logs.max_bytes,
        )
    )
    failure_class, failure_detail = _failure_of(outcome, "check", services)
    result = CheckResult(
        name=check.name,
        **_ran(outcome),
        error=outcome.error,
        failure_class=failure_class,
        failure_detail=failure_detail,
        sandbox=sandbox_mode(options),
        **denial_fields(denied),
    )
    scan_bytes = services.loaded.config.recovery.context.evidence_scan_bytes
    return judged_against_base(result, check, stage, ctx, scan_bytes=scan_bytes)


def run_stage(
    record: RunRecord, stage: StageConfig, services: StageServices
) -> tuple[RunRecord, Attempt]:
    """Run one attempt of ``stage`` and persist it (start, process identity, result).
    Returns the updated record and the finished attempt, reported. Interruption marks the
    attempt ``interrupted``, saves, and propagates."""
    store, config = services.storage.runs, services.loaded.config
    layout = StateLayout.of_run_dir(Path(record.run_dir))  # its workspace
    logs, pr_record = layout.logs_dir(record.run_id), layout.pull_request_path(record.run_id)
    engine, model = engine_and_model(record, stage, config)
    hosts = egress_hosts(stage, config, engine, record.repository, services.environ)
    access = stage_network(stage, hosts)
    record, attempt = attempt_started(
        record, stage.name, engine=engine, model=model,
        sandbox=None if stage.is_check_stage else sandbox_mode(stage),
        egress=access.mode if access is not None else None, at=services.clock(),
    )  # fmt: skip
    store.save(record, CrashPoint.ATTEMPT_STARTED)
    ctx = stage_context(record, stage.name, engine, model, attempt.number, store)
    cwd = Path(record.clone_dir) if stage.cwd == "clone" else Path(record.run_dir)
    cwd.parent.mkdir(parents=True, exist_ok=True)

    def remember_group(identity: runner.ProcessIdentity) -> None:
        nonlocal record, attempt
        attempt = attempt.model_copy(
            update={"pgid": identity.pgid, "start_ticks": identity.start_ticks}
        )
        record = record.with_attempt(attempt)
        store.save(record, CrashPoint.ATTEMPT_GROUP)

    unsandboxed = None if stage.is_check_stage else stage
    warn_at_start(services.reporter, f"stage {stage.name}", unsandboxed, access)
    try:
        if stage.is_check_stage:
            attempt = _run_checks(attempt, stage, ctx, cwd, logs, services, remember_group)
        else:
            services.reporter.stage_started(stage.name, attempt.number, "")
            process = _StageProcess(
                stage, ctx, cwd, logs / f"{attempt.number:03d}-{stage.name}.log", hosts,
                remember_group,
            )  # fmt: skip
            run = _engine_attempt if stage.engine is not None else _command_attempt
            attempt = run(record, attempt, process, services)
    except BaseException:
        # The attempt, still running, is interrupted and its stage pending again.
        stopped = interrupted(record.with_attempt(attempt), at=services.clock())
        store.save(stopped, CrashPoint.ATTEMPT_INTERRUPTED)
        raise
    opened = attempt.ok and stage.side_effectful and pr_record.is_file()
    pull_request = str(pr_record) if opened else None
    record = attempt_finished(record, attempt, pull_request=pull_request, at=services.clock())
    store.save(record, CrashPoint.ATTEMPT_FINISHED)
    services.reporter.stage_finished(attempt)
    return record, attempt


@dataclass(frozen=True)
class _StageProcess:
    """How the one process of an engine's or a command's attempt runs."""

    stage: StageConfig
    ctx: StageContext
    cwd: Path
    log_path: Path
    hosts: tuple[str, ...]  # what it reaches besides its own ``egress``
    on_start: Callable[[runner.ProcessIdentity], None]


def _engine_attempt(
    record: RunRecord, attempt: Attempt, process: _StageProcess, services: StageServices
) -> Attempt:
    """The engine's run, with what it reported (turns, tokens, cost, its last words)."""
    stage, ctx, config = process.stage, process.ctx, services.loaded.config
    denied: dict[str, int] = {}  # what the egress proxy refuses it
    executor = sandboxed(
        services, stage, cwd=process.cwd, ctx=ctx, role="engine", egress_hosts=process.hosts,
        egress_denied=denied,
    )  # fmt: skip
    result = run_engine(
        stage=stage, engine=config.engines[ctx.engine], model=ctx.model, ctx=ctx,
        environ=dict(services.environ), log_path=process.log_path, executor=executor,
        on_start=process.on_start,
        on_tick=lambda elapsed: services.reporter.tick(stage.name, elapsed),
        tick_s=services.tick_s,
        write_files=partial(services.storage.runs.write_workspace_files, record.run_id),
        max_log_bytes=config.logs.max_bytes,
        feedback=engine_feedback(record, stage.name, services.storage.decisions),
    )  # fmt: skip
    attempt = _with_engine_report(_finish_attempt(attempt, result.process), result, config.prices)
    return with_denials(attempt, denied)


def _command_attempt(
    record: RunRecord, attempt: Attempt, process: _StageProcess, services: StageServices
) -> Attempt:
    """The stage's configured command run, and its failure's class if one is recognised."""
    stage, ctx, config = process.stage, process.ctx, services.loaded.config
    assert stage.command is not None  # the config validates: exactly one kind of work
    denied: dict[str, int] = {}  # what the egress proxy refuses it
    executor = sandboxed(
        services, stage, cwd=process.cwd, ctx=ctx, side_effectful=stage.side_effectful,
        command=stage.command, egress_hosts=process.hosts, egress_denied=denied,
    )  # fmt: skip
    env = {
        **stage_environ(services.environ, ctx, stage.pass_env),
        # Where its forge is, as its egress allows it (issue 43).
        **forge_urls(stage, config, record.repository, services.environ),
    }
    outcome = executor.run(
        ProcessRequest(
            expand_command(stage.command, root=services.loaded.root, ctx=ctx), cwd=process.cwd,
            env=env, log_path=process.log_path, timeout_s=stage.timeout_s,
            kill_after_s=stage.kill_after_s, on_start=process.on_start,
            on_tick=lambda elapsed: services.reporter.tick(stage.name, elapsed),
            tick_s=services.tick_s, max_log_bytes=config.logs.max_bytes,
        )
    )  # fmt: skip
    attempt = with_denials(_finish_attempt(attempt, outcome), denied)
    failure_class, failure_detail = _failure_of(outcome, "stage", services)
    if failure_class is not None:
        attempt = attempt.revised(failure_class=failure_class, failure_detail=failure_detail)
    return attempt


def _failure_of(
    outcome: runner.ProcessOutcome, kind: Literal["stage", "check"], services: StageServices
) -> tuple[str | None, str | None]:
    """A failed process's infrastructure class and what was recognised (None: neither)."""
    if outcome.ok:
        return None, None
    scan = services.loaded.config.recovery.context.evidence_scan_bytes
    named = read_failure(outcome, kind=kind, scan_bytes=scan).named
    return (named.failure.value, named.detail) if named else (None, None)


def engine_cost(
    report: EngineReport, model: str | None, prices: Mapping[str, PriceConfig]
) -> tuple[float | None, bool]:
    """The attempt's cost and whether it is our estimate: the engine's own figure when it
    says one; else, with its tokens known and ``[prices]`` naming the model (as written,
    or after its provider prefix: aider's ``anthropic/claude-…``), tokens times prices, cache
    reads and writes priced as input (an upper bound); else unknown."""
    if report.cost_usd is not None:
        return report.cost_usd, False
    usage = report.usage
    if not usage.known or model is None:
        return None, False
    price = prices.get(model) or prices.get(model.rsplit("/", 1)[-1])
    if price is None:
        return None, False
    sent = sum(
        n or 0 for n in (usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens)
    )
    return round(price.cost_usd(sent, usage.output_tokens or 0), 6), True


def _with_engine_report(
    attempt: Attempt, result: EngineOutcome, prices: Mapping[str, PriceConfig]
) -> Attempt:
    report = result.report
    usage = report.usage if report else NO_USAGE
    cost, estimated = engine_cost(report, attempt.model, prices) if report else (None, False)
    # ``revised``: the engine's own words are redacted (and cut) as they enter the record.
    return attempt.revised(
        turns=report.turns if report else None,
        cost_usd=cost,
        cost_estimated=estimated,
        **asdict(usage),  # its four token counts, under the record's names
        final_message=report.final_message if report else None,
        failure_class=result.failure_class.value if result.failure_class else None,
        failure_detail=result.detail or (report.detail if report else None) or None,
        **_workspace_fields(result),
    )


def _workspace_fields(result: EngineOutcome) -> dict[str, object]:
    """What the workspace committed and left out as the engine's own, as the record has it."""
    summary = result.workspace
    if summary is None:
        return {}
    return {
        "committed_paths": summary.committed,
        "committed_count": summary.committed_count,
        "left_out_paths": summary.left_out,
        "left_out_count": summary.left_out_count,
    }


def _finish_attempt(attempt: Attempt, outcome: runner.ProcessOutcome) -> Attempt:
    # ``revised``: the runner's error text is redacted as it enters the record.
    return attempt.revised(
        status=AttemptStatus.FINISHED,
        ended_at=outcome.ended_at,
        error=outcome.error or None,
        pgid=outcome.pgid,
        **_ran(outcome),
    )


def _ran(outcome: runner.ProcessOutcome) -> dict[str, Any]:
    """What a finished process puts on its attempt's or its check's record."""
    return {
        "command": outcome.argv,
        "exit_code": outcome.exit_code,
        "timed_out": outcome.timed_out,
        "signal": outcome.signal,
        "duration_s": round(outcome.duration_s, 6),
        "log_path": str(outcome.log_path),
    }


def _learn_from_green(services: StageServices, repo: str, check: str, log: Path) -> None:
    """Teach the check's baseline its passing log. A baseline is a cache: whatever goes
    wrong learning is said and the run goes on (an interruption still stops it)."""
    if services.record_green is None:
        return
    try:
        services.record_green(repo, check, log, warn=services.reporter.note)
    except Exception as exc:  # noqa: BLE001 -- a cache's bug must not fail the ticket
        services.reporter.note(f"baseline of check {check!r} not updated: {redact(str(exc))}")


def _run_checks(
    attempt: Attempt,
    stage: StageConfig,
    ctx: StageContext,
    cwd: Path,
    logs: Path,
    services: StageServices,
    remember_group: Callable[[runner.ProcessIdentity], None],
) -> Attempt:
    """Run the stage's checks in order and stop at the first that fails: that check is
    the ``failing_check`` the recovery loop will have to turn green again."""
    results: list[CheckResult] = []
    failed: CheckResult | None = None
    for check in stage.checks:
        if check.kinds and ctx.ticket_kind not in check.kinds:
            results.append(
                CheckResult(name=check.name, command=check.command, exit_code=None, skipped=True)
            )
            continue
        services.reporter.stage_started(stage.name, attempt.number, f"check {check.name} started")
        log_path = logs / f"{attempt.number:03d}-{stage.name}-{check.name}.log"
        result = run_check(check, stage, ctx, cwd, log_path, services, remember_group)
        results.append(result)
        if result.passed and not result.already_on_base and result.log_path is not None:
            _learn_from_green(services, ctx.repository, check.name, Path(result.log_path))
        if not result.passed:
            failed = result
            break
    ended = services.clock()
    last_log = next((r.log_path for r in reversed(results) if r.log_path), None)
    kept = set(FailingCheck.model_fields)  # the check's name, command and how it ended
    failing = FailingCheck(**failed.model_dump(include=kept)) if failed else None
    return attempt.model_copy(
        update={
            "status": AttemptStatus.FINISHED,
            "ended_at": ended,
            "duration_s": round((ended - attempt.started_at).total_seconds(), 6),
            "exit_code": failing.exit_code if failing else 0,
            "timed_out": failing.timed_out if failing else False,
            "signal": failing.signal if failing else None,
            "log_path": failing.log_path if failing else last_log,
            "checks": tuple(results),
            "failing_check": failing,
            "command": failing.command if failing else (),
            # The failing check's class is the attempt's: infrastructure never reaches
            # the model, whether a stage or one of its checks met it.
            "failure_class": failed.failure_class if failed else None,
            "failure_detail": failed.failure_detail if failed else None,
        }
    )
