"""mechanical-fix: a known-shape violation with a deterministic repair. The recipe runs
in the clone with git hardened; then what it did is judged on what will ship. Red when a
command fails, when it changed git's own files (config, hooks, info — restored byte for
byte), left a symbolic link out of the clone, left uncommitted changes, or changed the
check's own files; otherwise the ORIGINAL failing check from config runs on a clean
checkout of the new HEAD. Green → continue from the failed stage. Red → keep the result
as a ref, restore the clone, and fall back to a plain retry of the code stage. Recipe
plus fallback: one retry charge.

Every verdict's report is its own file (``<run-id>.mechanical_fix-<n>.json``); the
run's latest is also written under the older one-per-run name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.actions.plan import DecisionToApply, Dispatch, Effect, PlanFacts
from orchestrator.actions.rerun import rerun_from, told_about
from orchestrator.actions.shipping import default_protected, protected_hits, uncommitted
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.errors import StateError
from orchestrator.domain.fix_report import FixReport, FixStatus, Verifier
from orchestrator.domain.recipes import plan_recipe
from orchestrator.domain.verdicts import MechanicalFixVerdict

if TYPE_CHECKING:
    from orchestrator.domain.config import CheckConfig, StageConfig
    from orchestrator.domain.runs import CheckResult, RunRecord
    from orchestrator.execution.attempts import StageServices
    from orchestrator.execution.executor import Executor
    from orchestrator.execution.integrity import Snapshot
    from orchestrator.execution.stage_env import StageContext


def plan(verdict: MechanicalFixVerdict, facts: PlanFacts) -> Dispatch:
    argvs, recipe_errors = plan_recipe(
        verdict.repair_plan.commands,
        clone_dir=Path(facts.record.clone_dir),
        allowlist=facts.config.recovery.recipe_allowlist,
    )
    return Dispatch(
        verdict.action, facts.approval, rerun=facts.failing.name, fallback=facts.code.name,
        recipe=tuple(argvs), recipe_errors=tuple(recipe_errors),
        verify_check=facts.failing_check,
    )  # fmt: skip


def check_files(argv: tuple[str, ...], clone: Path) -> list[Path]:
    """The files inside the clone a check's command names (its script, its config): a
    recipe that edits them has weakened the verifier, so its green does not count."""
    found = []
    for arg in argv[1:] + argv[:1]:
        candidate = Path(arg) if Path(arg).is_absolute() else clone / arg
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved.is_file() and resolved.is_relative_to(clone.resolve()):
            found.append(resolved)
    return found


def file_digests(paths: list[Path]) -> dict[str, str]:
    out = {}
    for path in paths:
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "missing"
    return out


def _verify_on_checkout(fix: _Fix, git_env: dict[str, str]) -> CheckResult | str:
    """Run the fix's check on a clean checkout of the clone's HEAD (removed afterwards),
    or say why the checkout could not be made (a config refused as read from there, too)."""
    from orchestrator.execution import git_calls
    from orchestrator.execution.attempts import git_sandbox, run_check

    clone, run_dir, log_prefix = (
        fix.clone,
        Path(fix.record.run_dir),
        fix.logs / f"verdict-{fix.n}-verify",
    )
    checkout = run_dir / f"verify-{fix.n}"
    checkout_log = log_prefix.with_name(f"{log_prefix.name}-checkout.log")
    in_box = git_sandbox(fix.services, clone, writes=True)  # a checkout runs the clone's config
    unmade = git_calls.add_checkout(in_box, clone, checkout, git_env, checkout_log)
    if unmade is not None:
        git_calls.remove_checkout(in_box, clone, checkout, git_env, checkout_log)
        return unmade
    try:
        cwd = checkout if fix.stage.cwd == "clone" else run_dir
        log = log_prefix.with_name(f"{log_prefix.name}-{fix.check.name}.log")
        ctx = replace(fix.ctx, clone_dir=checkout)
        return run_check(fix.check, fix.stage, ctx, cwd, log, fix.services)
    finally:
        git_calls.remove_checkout(in_box, clone, checkout, git_env, checkout_log)


def _contained(git_files: Snapshot, guarded_git: list[Path], clone: Path) -> str | None:
    """Why the clone is no longer safe for git to work in, if it is not: git's own files
    changed (a new config could name programs), or a link leads out of the clone (a
    later write would land there)."""
    from orchestrator.execution import integrity

    tampered = integrity.changes(git_files, integrity.snapshot(guarded_git))
    if tampered:
        return f"the recipe changed git's own files: {_relative(tampered, clone)}"
    escaping = integrity.escaping_symlinks(clone)
    if escaping:
        return f"the recipe left symbolic links that lead outside the clone: {escaping}"
    return None


def _relative(paths: list[str], clone: Path) -> list[str]:
    root = clone.resolve()
    return [str(Path(p).relative_to(root)) if Path(p).is_relative_to(root) else p for p in paths]


@dataclass(frozen=True)
class _Fix:
    """One decision's fix as it is carried out: what each step reads."""

    record: RunRecord
    applying: DecisionToApply
    plan: Dispatch
    services: StageServices
    rerun: str  # resumed at when green
    fallback: str  # re-run when red
    stage: StageConfig
    check: CheckConfig
    clone: Path
    n: int
    logs: Path
    ctx: StageContext
    env: dict[str, str]

    @classmethod
    def of(
        cls, record: RunRecord, applying: DecisionToApply, plan: Dispatch, services: StageServices
    ) -> _Fix:
        from orchestrator.execution.attempts import stage_context
        from orchestrator.execution.stage_env import stage_environ
        from orchestrator.storage.layout import StateLayout

        assert plan.rerun is not None and plan.fallback is not None
        stage = applying.failing_stage
        ctx = stage_context(
            record, stage.name, "", "", record.counters.attempts, services.storage.runs
        )
        return cls(
            record, applying, plan, services, plan.rerun, plan.fallback, stage,
            check=next(c for c in stage.checks if c.name == plan.verify_check),
            clone=Path(record.clone_dir), n=applying.number,
            logs=StateLayout.of_run_dir(Path(record.run_dir)).logs_dir(record.run_id),
            ctx=ctx, env=stage_environ(services.environ, ctx),
        )  # fmt: skip

    def save(self, report: FixReport) -> FixReport:
        """The report's one write: the plan, then the result, then the rollback."""
        self.services.storage.runs.write_mechanical_fix(self.record.run_id, self.n, report.stored())
        return report

    def green(self) -> tuple[RunRecord, Effect]:
        return self.record.reset_stages_from(self.rerun), Effect(
            outcome=f"mechanical-fix green: {self.check.name} passes", resume_at=self.rerun
        )

    def fall_back(self, red_reason: str | None, then: str = "") -> tuple[RunRecord, Effect]:
        then = then or f"fell back to retry of {self.fallback}"
        config = self.services.loaded.config
        return rerun_from(
            told_about(self.record, self.fallback, self.applying, config),
            self.fallback, f"mechanical-fix red ({red_reason}); {then}",
        )  # fmt: skip


@dataclass(frozen=True)
class _Hardened:
    """The clone made safe for the recipe and our git calls, and what the recipe may
    not change, noted before it runs."""

    in_box: Executor  # for our git calls that check files out or read the work tree
    git_env: dict[str, str]  # hooks, pagers, drivers… switched off
    guarded_git: list[Path]  # git's own files
    git_files: Snapshot
    guarded: list[Path]  # the check's own files
    before: dict[str, str]  # their digests
    head_before: str | None
    status_before: list[str] | None


def apply(
    record: RunRecord, applying: DecisionToApply, plan: Dispatch, services: StageServices
) -> tuple[RunRecord, Effect]:
    """Run the plan's recipe, verify with the plan's check; green → resume at the plan's
    stage, red → keep the result, restore the clone, re-run the plan's fallback."""
    from orchestrator.execution import git

    assert isinstance(applying.verdict, MechanicalFixVerdict)  # the plan was made from it
    fix = _Fix.of(record, applying, plan, services)
    resumed = _resume(fix)
    if not isinstance(resumed, str | None):
        return resumed
    report = _planned(fix, applying.verdict)
    # Before any git call in the clone (the driver checks the same before it decides;
    # this holds for a decision carried out later, after an approval or a kill).
    untrusted = git.clone_git_dir_problem(fix.clone) or git.config_problem(
        services.executor, fix.clone, fix.env
    )
    if untrusted is not None:
        # Red before anything ran, and nothing is put back: a git call to restore the
        # clone is exactly what may not happen.
        red_reason = f"recipe refused: {untrusted}; nothing was run"
        fix.save(
            report.revised(status="red", red_reason=red_reason, refused=untrusted, restored=False)
        )
        services.reporter.note(f"mechanical fix refused ({untrusted}); falling back to a retry")
        return fix.fall_back(red_reason)
    hardened, report = _harden(fix, report, restart_from=resumed)
    report, tampered = _run_contained(fix, hardened, report)
    report = fix.save(_judge(fix, hardened, report))
    if report.red_reason is None:
        services.reporter.note(f"mechanical fix verified: {fix.check.name} is green")
        return fix.green()
    services.reporter.note(f"mechanical fix red ({report.red_reason}); falling back to a retry")
    return _roll_back(fix, hardened, report, tampered)


def _resume(fix: _Fix) -> tuple[RunRecord, Effect] | str | None:
    """Carried out before a kill: what it did stands, and is not done twice. Its outcome
    when it had finished (green on the HEAD it verified; red and rolled back), else the
    commit a fix cut short started from (None: none had started)."""
    from orchestrator.execution import git, git_calls

    try:
        previous = fix.services.storage.runs.read_mechanical_fix(fix.record.run_id, fix.n)
    except StateError:
        previous = None  # not readable: the fix runs as if it never had
    if previous is None:
        return None
    if previous.status == "green":
        executor = fix.services.executor
        env = git.clone_git_env(executor, fix.clone, fix.env)
        head = git_calls.head_commit(executor, fix.clone, env)
        if head is not None and head == previous.verified_commit:
            return fix.green()
    if previous.status == "red" and previous.restored is not None:
        return fix.fall_back(previous.red_reason)
    return previous.head_before


def _planned(fix: _Fix, verdict: MechanicalFixVerdict) -> FixReport:
    return FixReport(
        run_id=fix.record.run_id, verdict=fix.n, source=fix.applying.source,
        summary=verdict.summary, repair_plan=verdict.repair_plan, argv=fix.plan.recipe,
        verifier=Verifier(check=fix.check.name, command=fix.check.command), commands=(),
        sandbox=fix.services.loaded.config.recovery.recipe_sandbox, status="running",
    )  # fmt: skip


def _harden(fix: _Fix, report: FixReport, restart_from: str | None) -> tuple[_Hardened, FixReport]:
    """Git made safe in the clone (its hooks, pagers, drivers off), a fix cut short
    started again from its first commit, what the recipe may not change noted, and the
    plan written with the commit it starts from."""
    from orchestrator.execution import git, git_calls, integrity
    from orchestrator.execution.attempts import git_sandbox

    clone, executor, n = fix.clone, fix.services.executor, fix.n
    # Our git calls that check files out or read the work tree (status, diff, reset,
    # clean) run in the sandbox: what the clone's config names would run there. Config
    # reads and rev-parse run nothing, and read the user's own identity: not boxed.
    in_box = git_sandbox(fix.services, clone, writes=True)
    if restart_from is not None:
        # Cut short: start again from the commit it started from (what it left is kept).
        git_calls.keep_and_restore(
            in_box, clone, keep_as=f"refs/orchestrator/{fix.record.run_id}/recipe-{n}-cut",
            restore_to=restart_from, env=fix.env,
            log_prefix=fix.logs / f"verdict-{n}-resume-restore",
        )  # fmt: skip
    guarded = check_files(fix.check.command, clone)
    before = file_digests(guarded)
    clone_config = git.read_clone_config(executor, clone, fix.env)
    git_env = git.git_env_for(clone_config, fix.env)
    guarded_git = integrity.guarded_paths(clone, git.configured_hooks_path(clone_config))
    git_files = integrity.snapshot(guarded_git)
    head_before = git_calls.head_commit(executor, clone, git_env)
    report = fix.save(report.revised(head_before=head_before))  # the plan, before it runs
    status_before = git_calls.status_entries(in_box, clone, git_env)
    hardened = _Hardened(
        in_box, git_env, guarded_git, git_files, guarded, before, head_before, status_before
    )
    return hardened, report


def _run_contained(
    fix: _Fix, hardened: _Hardened, report: FixReport
) -> tuple[FixReport, list[str]]:
    """The recipe, run in its sandbox; red when it is refused, a command fails, or it
    changed git's own files or left a link out of the clone."""
    from orchestrator.execution import git, integrity
    from orchestrator.execution.attempts import secrets_of
    from orchestrator.execution.recipes import recipe_executor, run_recipe
    from orchestrator.execution.stage_sandbox import hidden_for, home_of

    services, config, clone, h = fix.services, fix.services.loaded.config, fix.clone, hardened
    recipe_runner, refused = recipe_executor(
        services.executor, clone=clone, mode=config.recovery.recipe_sandbox,
        locate=services.locate_bwrap,
        # Other tickets' clones, the keys, the ledger, the config's directory: out of
        # sight, as for any stage; a file holding a secret empty wherever it would show.
        hidden=hidden_for(
            services.storage.runs.state_dir, home_of(services.environ), services.loaded.root
        ),
        masked=secrets_of(services),
    )  # fmt: skip
    red_reason = "; ".join(fix.plan.recipe_errors) if fix.plan.recipe_errors else refused
    if red_reason is not None:
        return report.revised(red_reason=red_reason), []
    ran = run_recipe(
        fix.plan.recipe, executor=recipe_runner, clone=clone, env=h.git_env,
        log_path=lambda i: fix.logs / f"verdict-{fix.n}-recipe-{i}.log",
        timeout_s=config.recovery.recipe_command_timeout_s, kill_after_s=fix.stage.kill_after_s,
        note=services.reporter.note,
        # What one command left must not be used by the next: git's own files, links
        # out, and the config git now reads (recomputed: a new include, a new driver).
        between=lambda: (
            _contained(h.git_files, h.guarded_git, clone)
            or git.config_drift(services.executor, clone, fix.env, h.git_env)
        ),
        max_log_bytes=config.logs.max_bytes,
    )  # fmt: skip
    tampered = integrity.changes(h.git_files, integrity.snapshot(h.guarded_git))
    red_reason = _contained(h.git_files, h.guarded_git, clone) or ran.red_reason
    return report.revised(commands=ran.commands, red_reason=red_reason), tampered


def _judge(fix: _Fix, hardened: _Hardened, report: FixReport) -> FixReport:
    """Judged on what will ship: only committed work, leaving the protected paths alone,
    then the original check on a clean checkout of the new HEAD."""
    if report.red_reason is None:
        report, hits = _judge_tree(fix, hardened, report)
        if report.red_reason is None:
            report = _verify(fix, hardened, report, hits)
    status: FixStatus = "green" if report.red_reason is None else "red"
    return report.revised(status=status, red_reason=report.red_reason)


def _judge_tree(fix: _Fix, hardened: _Hardened, report: FixReport) -> tuple[FixReport, list[str]]:
    """What the recipe left in the clone: uncommitted work, protected paths it changed."""
    from orchestrator.execution import git_calls

    clone, check, h = fix.clone, fix.check, hardened
    left = uncommitted(h.status_before, git_calls.status_entries(h.in_box, clone, h.git_env))
    protected = (
        list(check.protected)
        if check.protected is not None
        else default_protected(check.command, _relative([str(p) for p in h.guarded], clone))
    )
    committed = (
        git_calls.changed_paths(h.in_box, clone, h.git_env, h.head_before, "HEAD")
        if h.head_before is not None
        else []
    )
    touched = None if committed is None else committed + [e[3:] for e in left if len(e) > 3]
    hits = protected_hits(touched or [], protected)
    red_reason = None
    if touched is None:
        red_reason = "could not list the paths the recipe changed"
    elif hits and left:
        red_reason = f"the recipe changed protected paths: {hits}"
    elif left:
        red_reason = f"the recipe left uncommitted changes: {left}"
    return report.revised(uncommitted=left, protected=protected, red_reason=red_reason), hits


def _verify(fix: _Fix, hardened: _Hardened, report: FixReport, hits: list[str]) -> FixReport:
    """What ships is the committed result: the check runs on a clean checkout of HEAD."""
    from orchestrator.execution import git_calls

    head = git_calls.head_commit(fix.services.executor, fix.clone, hardened.git_env)
    report = report.revised(verified_commit=head)
    result = _verify_on_checkout(fix, hardened.git_env)
    if isinstance(result, str):
        why = f"could not check out the recipe's result for verification: {result}"
        return report.revised(red_reason=why)
    red_reason = None
    changed = [p for p, d in file_digests(hardened.guarded).items() if hardened.before.get(p) != d]
    if changed:  # a pass by a weakened check does not count
        red_reason = f"the recipe changed the check's own files: {changed}"
    elif hits:  # so is a pass by deleting or rewriting the tests that failed
        red_reason = f"the recipe changed protected paths: {hits}"
    elif not result.passed:
        red_reason = f"verification check {fix.check.name!r} still fails (exit {result.exit_code})"
    return report.revised(verification=result, red_reason=red_reason)


def _roll_back(
    fix: _Fix, hardened: _Hardened, report: FixReport, tampered: list[str]
) -> tuple[RunRecord, Effect]:
    """Red: the fallback retry must not build on the red result (nor on a weakened
    check). The result is kept as a ref and the clone restored to where it started."""
    from orchestrator.execution import git, git_calls, integrity

    clone, n = fix.clone, fix.n
    if tampered:
        # First: the rollback's own git calls read this config.
        integrity.restore(hardened.git_files, integrity.snapshot(hardened.guarded_git))
        report = report.revised(restored_git_files=_relative(tampered, clone))
    elsewhere = git.clone_git_dir_problem(clone)
    if elsewhere is not None:
        # A rollback would reset another repository: the clone stays as it is, for a
        # person (the driver stops the run before anything works in it again).
        fix.save(report.revised(restored=False, not_restored=elsewhere))
        return fix.fall_back(report.red_reason, "the clone was not restored")
    ref = f"refs/orchestrator/{fix.record.run_id}/recipe-{n}"
    restored = git_calls.keep_and_restore(
        hardened.in_box, clone, keep_as=ref, restore_to=hardened.head_before, env=fix.env,
        log_prefix=fix.logs / f"verdict-{n}-restore",
    )  # fmt: skip
    fix.save(report.revised(kept_as=ref, restored=restored))
    return fix.fall_back(report.red_reason)


SPEC: ActionSteps[MechanicalFixVerdict] = ActionSteps(name="mechanical-fix", plan=plan, apply=apply)
