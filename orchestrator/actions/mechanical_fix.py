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
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.actions.plan import Applying, Dispatch, Effect, PlanFacts
from orchestrator.actions.rerun import rerun_from, told_about
from orchestrator.actions.shipping import default_protected, protected_hits, uncommitted
from orchestrator.actions.spec import ActionSteps
from orchestrator.domain.errors import StateError
from orchestrator.domain.recipes import plan_recipe
from orchestrator.domain.verdicts import MechanicalFixVerdict

if TYPE_CHECKING:
    from orchestrator.domain.config import CheckConfig, StageConfig
    from orchestrator.domain.runs import CheckResult, RunRecord
    from orchestrator.execution.attempts import StageServices
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


def _verify_on_checkout(
    record: RunRecord,
    check: CheckConfig,
    stage: StageConfig,
    ctx: StageContext,
    services: StageServices,
    git_env: dict[str, str],
    log_prefix: Path,
    number: int,
) -> CheckResult | str:
    """Run ``check`` on a clean checkout of the clone's HEAD (removed afterwards), or say
    why the checkout could not be made (a config refused as read from there, too)."""
    from orchestrator.execution import git_calls
    from orchestrator.execution.attempts import git_sandbox, run_check

    clone = Path(record.clone_dir)
    checkout = Path(record.run_dir) / f"verify-{number}"
    checkout_log = log_prefix.with_name(f"{log_prefix.name}-checkout.log")
    in_box = git_sandbox(services, clone, writes=True)  # a checkout runs the clone's config
    unmade = git_calls.add_checkout(in_box, clone, checkout, git_env, checkout_log)
    if unmade is not None:
        git_calls.remove_checkout(in_box, clone, checkout, git_env, checkout_log)
        return unmade
    try:
        cwd = checkout if stage.cwd == "clone" else Path(record.run_dir)
        log = log_prefix.with_name(f"{log_prefix.name}-{check.name}.log")
        return run_check(check, stage, replace(ctx, clone_dir=checkout), cwd, log, services)
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


def _refuse(
    record: RunRecord,
    report: dict[str, Any],
    why: str,
    fallback: str,
    services: StageServices,
    applying: Applying,
) -> tuple[RunRecord, Effect]:
    """Red before anything ran: the clone cannot be worked in (its ``.git`` is not its
    own, or its config says what only an attacker would). Nothing ran, so nothing is put
    back: a git call to restore it is exactly what may not happen."""
    report.update(status="red", red_reason=f"recipe refused: {why}; nothing was run")
    report.update(refused=why, restored=False)
    services.storage.runs.write_mechanical_fix(record.run_id, report["verdict"], report)
    services.reporter.note(f"mechanical fix refused ({why}); falling back to a retry")
    return rerun_from(
        told_about(record, fallback, applying, services.loaded.config),
        fallback,
        f"mechanical-fix red ({report['red_reason']}); fell back to retry of {fallback}",
    )


def _relative(paths: list[str], clone: Path) -> list[str]:
    root = clone.resolve()
    return [str(Path(p).relative_to(root)) if Path(p).is_relative_to(root) else p for p in paths]


def apply(
    record: RunRecord, applying: Applying, plan: Dispatch, services: StageServices
) -> tuple[RunRecord, Effect]:
    """Run the plan's recipe, verify with the plan's check; green → resume at the plan's
    stage, red → keep the result, restore the clone, re-run the plan's fallback."""
    from orchestrator.execution import git, git_calls, integrity
    from orchestrator.execution.attempts import git_sandbox, secrets_of, stage_context
    from orchestrator.execution.recipes import recipe_executor, run_recipe
    from orchestrator.execution.stage_env import stage_environ
    from orchestrator.execution.stage_sandbox import hidden_for, home_of
    from orchestrator.storage import StateLayout

    verdict = applying.verdict
    assert isinstance(verdict, MechanicalFixVerdict)  # the plan was made from this verdict
    assert plan.rerun is not None and plan.fallback is not None
    config, store = services.loaded.config, services.storage.runs
    clone = Path(record.clone_dir)
    stage = applying.failing_stage
    check = next(c for c in stage.checks if c.name == plan.verify_check)
    n = applying.number
    logs = StateLayout.of_run_dir(Path(record.run_dir)).logs_dir(record.run_id)
    ctx = stage_context(record, stage.name, "", "", record.counters.attempts, store)
    env = stage_environ(services.environ, ctx)
    # Carried out before a kill: what it did stands, and is not done twice.
    try:
        previous = store.read_mechanical_fix(record.run_id, n)
    except StateError:
        previous = None  # not readable: the fix runs as if it never had
    earlier = previous.head_before if previous is not None else None
    if previous is not None and previous.status == "green":
        head = git_calls.head_commit(
            services.executor, clone, git.clone_git_env(services.executor, clone, env)
        )
        if head is not None and head == previous.verified_commit:
            return record.reset_stages_from(plan.rerun), Effect(
                outcome=f"mechanical-fix green: {check.name} passes", resume_at=plan.rerun
            )
    if previous is not None and previous.status == "red" and previous.restored is not None:
        return rerun_from(
            told_about(record, plan.fallback, applying, config), plan.fallback,
            f"mechanical-fix red ({previous.red_reason}); fell back to retry of {plan.fallback}",
        )  # fmt: skip
    report: dict[str, Any] = {
        "run_id": record.run_id,
        "verdict": n,
        "source": applying.source,
        "summary": verdict.summary,
        "repair_plan": verdict.repair_plan.model_dump(),
        "argv": [list(a) for a in plan.recipe],
        "verifier": {"check": check.name, "command": list(check.command)},
        "commands": [],
        "sandbox": config.recovery.recipe_sandbox,
        "status": "running",
    }
    # Before any git call in the clone (the driver checks the same before it decides;
    # this holds for a decision carried out later, after an approval or a kill).
    untrusted = git.clone_git_dir_problem(clone) or git.config_problem(
        services.executor, clone, env
    )
    if untrusted is not None:
        return _refuse(record, report, untrusted, plan.fallback, services, applying)
    # Our git calls that check files out or read the work tree (status, diff, reset,
    # clean) run in the sandbox: what the clone's config names would run there. Config
    # reads and rev-parse run nothing, and read the user's own identity: not boxed.
    in_box = git_sandbox(services, clone, writes=True)
    if isinstance(earlier, str):
        # Cut short: start again from the commit it started from (what it left is kept).
        git_calls.keep_and_restore(
            in_box, clone, keep_as=f"refs/orchestrator/{record.run_id}/recipe-{n}-cut",
            restore_to=earlier, env=env, log_prefix=logs / f"verdict-{n}-resume-restore",
        )  # fmt: skip
    guarded = check_files(check.command, clone)
    before = file_digests(guarded)
    # Recipes and our own git calls in the clone: hooks, pagers, drivers… switched off.
    clone_config = git.read_clone_config(services.executor, clone, env)
    git_env = git.git_env_for(clone_config, env)
    guarded_git = integrity.guarded_paths(clone, git.configured_hooks_path(clone_config))
    git_files = integrity.snapshot(guarded_git)
    pre_recipe = git_calls.head_commit(services.executor, clone, git_env)
    report["head_before"] = pre_recipe
    store.write_mechanical_fix(record.run_id, n, report)  # the plan, before it runs
    status_before = git_calls.status_entries(in_box, clone, git_env)
    red_reason = "; ".join(plan.recipe_errors) if plan.recipe_errors else None
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
    if red_reason is None and refused is not None:
        red_reason = refused
    tampered: list[str] = []
    if red_reason is None:
        ran = run_recipe(
            plan.recipe,
            executor=recipe_runner,
            clone=clone,
            env=git_env,
            log_path=lambda i: logs / f"verdict-{n}-recipe-{i}.log",
            timeout_s=config.recovery.recipe_command_timeout_s,
            kill_after_s=stage.kill_after_s,
            note=services.reporter.note,
            # What one command left must not be used by the next: git's own files, links
            # out, and the config git now reads (recomputed: a new include, a new driver).
            between=lambda: (
                _contained(git_files, guarded_git, clone)
                or git.config_drift(services.executor, clone, env, git_env)
            ),
            max_log_bytes=config.logs.max_bytes,
        )
        report["commands"], red_reason = list(ran.commands), ran.red_reason
        tampered = integrity.changes(git_files, integrity.snapshot(guarded_git))
        red_reason = _contained(git_files, guarded_git, clone) or red_reason
    if red_reason is None:
        status_after = git_calls.status_entries(in_box, clone, git_env)
        left = uncommitted(status_before, status_after)
        report["uncommitted"] = left
        protected = (
            list(check.protected)
            if check.protected is not None
            else default_protected(check.command, _relative([str(p) for p in guarded], clone))
        )
        report["protected"] = protected
        committed = (
            git_calls.changed_paths(in_box, clone, git_env, pre_recipe, "HEAD")
            if pre_recipe is not None
            else []
        )
        touched = None if committed is None else committed + [e[3:] for e in left if len(e) > 3]
        hits = protected_hits(touched or [], protected)
        if touched is None:
            red_reason = "could not list the paths the recipe changed"
        elif hits and left:
            red_reason = f"the recipe changed protected paths: {hits}"
        elif left:
            red_reason = f"the recipe left uncommitted changes: {left}"
    if red_reason is None:
        # What ships is the committed result: the check runs on a clean checkout of HEAD.
        report["verified_commit"] = git_calls.head_commit(services.executor, clone, git_env)
        result = _verify_on_checkout(
            record, check, stage, ctx, services, git_env, logs / f"verdict-{n}-verify", n
        )
        if isinstance(result, str):
            red_reason = f"could not check out the recipe's result for verification: {result}"
        else:
            report["verification"] = result.model_dump(mode="json")
            changed = [p for p, d in file_digests(guarded).items() if before.get(p) != d]
            if changed:  # a pass by a weakened check does not count
                red_reason = f"the recipe changed the check's own files: {changed}"
            elif hits:  # so is a pass by deleting or rewriting the tests that failed
                red_reason = f"the recipe changed protected paths: {hits}"
            elif not result.passed:
                red_reason = (
                    f"verification check {check.name!r} still fails (exit {result.exit_code})"
                )
    report["status"] = "green" if red_reason is None else "red"
    report["red_reason"] = red_reason
    store.write_mechanical_fix(record.run_id, n, report)
    if red_reason is None:
        services.reporter.note(f"mechanical fix verified: {check.name} is green")
        return record.reset_stages_from(plan.rerun), Effect(
            outcome=f"mechanical-fix green: {check.name} passes", resume_at=plan.rerun
        )
    services.reporter.note(f"mechanical fix red ({red_reason}); falling back to a retry")
    # The fallback retry must not build on the red result (nor on a weakened check).
    ref = f"refs/orchestrator/{record.run_id}/recipe-{n}"
    if tampered:
        # First: the rollback's own git calls read this config.
        integrity.restore(git_files, integrity.snapshot(guarded_git))
        report["restored_git_files"] = _relative(tampered, clone)
    elsewhere = git.clone_git_dir_problem(clone)
    if elsewhere is not None:
        # A rollback would reset another repository: the clone stays as it is, for a
        # person (the driver stops the run before anything works in it again).
        report.update(restored=False, not_restored=elsewhere)
        store.write_mechanical_fix(record.run_id, n, report)
        return rerun_from(
            told_about(record, plan.fallback, applying, config),
            plan.fallback,
            f"mechanical-fix red ({red_reason}); the clone was not restored",
        )
    report["kept_as"] = ref
    report["restored"] = git_calls.keep_and_restore(
        in_box, clone, keep_as=ref, restore_to=pre_recipe, env=env,
        log_prefix=logs / f"verdict-{n}-restore",
    )  # fmt: skip
    store.write_mechanical_fix(record.run_id, n, report)
    fallback = plan.fallback
    return rerun_from(
        told_about(record, fallback, applying, config),
        fallback,
        f"mechanical-fix red ({red_reason}); fell back to retry of {fallback}",
    )


SPEC: ActionSteps[MechanicalFixVerdict] = ActionSteps(name="mechanical-fix", plan=plan, apply=apply)
