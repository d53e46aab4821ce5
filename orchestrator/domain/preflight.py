"""Preflight rules: from facts about this machine (gathered by ``app/preflight.py``) to a
checklist that says, before a run spends anything, whether it can succeed here.

Pure: every rule is a function of ``Facts``, so each is pinned by a test without a
fixture. A check is

    ok     fine
    skip   not needed by this config, or checked later (a program the clone provides)
    warn   the run can succeed, but not as well as it could (no model key: failures go
           to a person without a diagnosis; git identity: the fallback author)
    fail   a run cannot succeed: ``orchestrator doctor`` exits 2, and ``run``/``batch``
           stop before anything is recorded, charged or started

and every warning and failure says how to fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from orchestrator.domain.broker_url import AUTH_FIX

Status = Literal["ok", "skip", "warn", "fail"]
MARKS: Final[Mapping[Status, str]] = {"ok": "✓", "skip": "-", "warn": "!", "fail": "✗"}


@dataclass(frozen=True)
class Check:
    """One line of the checklist. ``name`` is the kind of check (stable, for ``--json``
    readers); ``detail`` says what was found, ``fix`` what to do (warn and fail only)."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class ProgramFact:
    """The program one command starts, as the runner would start it. ``found``: where
    it is on the PATH the stage sees (None: not there); ``later``: a path relative to the
    clone or the run directory, which do not exist before the run."""

    where: str  # "stage clone", "check review:project-tests", "engine patch (stage implement)"
    program: str
    found: str | None
    later: bool = False


# How each engine kind is started to see that it starts, no model asked: its own
# ``--version``. A ``command`` engine's program is the user's (what it does with any
# argument is unknown, a model call included), so it is not run: inside its sandbox,
# ``sh`` looks it up on the PATH there and tests that it can be executed (the ``{program}``
# stands for it). ``patch`` runs the orchestrator's own Python: nothing to start.
VERSION_PROBE: Final = ("{program}", "--version")
LOOKUP_PROBE: Final = ("/bin/sh", "-c", 'p=$(command -v "$0") && test -x "$p" && echo "$p"',
                       "{program}")  # fmt: skip
ENGINE_PROBES: Final[Mapping[str, tuple[str, ...] | None]] = {
    "claude-code": VERSION_PROBE, "codex": VERSION_PROBE, "aider": VERSION_PROBE,
    "command": LOOKUP_PROBE, "patch": None,
}  # fmt: skip


def probe_argv(kind: str, program: str) -> tuple[str, ...] | None:
    """The argv that shows an engine of ``kind`` starts (``ENGINE_PROBES``), or None."""
    probe = ENGINE_PROBES.get(kind, LOOKUP_PROBE)
    return None if probe is None else tuple(program if a == "{program}" else a for a in probe)


@dataclass(frozen=True)
class ProbeResult:
    """What starting an engine's program in its sandbox (``probe_argv``) came to: it
    exited 0 (``said``: the first line it printed, its version), or not (``said``: its
    last words), or it was stopped at the probe's timeout."""

    ok: bool
    said: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    timeout_s: float = 0.0


@dataclass(frozen=True)
class EngineFact:
    """An engine stage's program as its attempt will start it: looked for on the PATH of
    its sandbox (``found``; None: not there), the files starting it takes that the
    sandbox hides (``hidden``: the program, the file its links lead to, its script's
    interpreter) and the places to add to the stage's ``readable`` to show them
    (``readable``, as a config writes them); what starting it said (``probe``; None: not
    started, see ``not_started``)."""

    where: str  # "engine claude-code (stage implement)"
    stage: str
    kind: str
    program: str
    found: str | None = None
    resolved: str | None = None  # ``found`` with its links followed
    later: bool = False  # under the clone or the run dir: there only once the run is
    sandboxed: bool = True
    hidden: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    declared: tuple[str, ...] = ()  # the stage's own readable, as written
    probe: ProbeResult | None = None
    not_started: str = ""  # why it was not started ("" and no probe: nothing to start)
    argv: tuple[str, ...] = ()  # what the probe runs


@dataclass(frozen=True)
class PassEnvFact:
    """A variable a stage's or engine's ``pass_env`` names (``who``: "stage x", "engine
    y"), whether it is set, and whether DRY_RUN keeps that stage from running now."""

    who: str
    name: str
    is_set: bool
    blocked_by_dry_run: bool = False


@dataclass(frozen=True)
class GitHubFact:
    """A stage that opens its pull request on a hosted forge (``orchestrator.stages.
    open_pr_github``; ``open_pr_gitlab`` for GitLab's merge requests)."""

    stage: str
    passes_token: bool  # the forge's token is in its pass_env (else it never sees it)
    blocked_by_dry_run: bool  # side-effectful while DRY_RUN is armed: it will not run now
    # The forge's ``overrides`` set here that its pass_env does not name: a stage's
    # environment is an allow-list (issue 40), so the stage would not see them.
    unpassed: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostedForge:
    """How the checklist names a hosted forge and the variables its stage reads."""

    name: str  # GitHub, GitLab
    token_env: str
    url_env: str  # the stage's override of where the API is
    request: str  # what its stage opens: "pull request", "merge request"
    # Every variable its stage reads to be pointed elsewhere (the stage module's OVERRIDES).
    overrides: tuple[str, ...] = ()


GITHUB = HostedForge(
    "GitHub", "GITHUB_TOKEN", "ORCHESTRATOR_GITHUB_API_URL", "pull request",
    ("ORCHESTRATOR_GITHUB_REPO", "ORCHESTRATOR_GITHUB_API_URL", "ORCHESTRATOR_GITHUB_PUSH_URL"),
)  # fmt: skip
GITLAB = HostedForge(
    "GitLab", "GITLAB_TOKEN", "ORCHESTRATOR_GITLAB_URL", "merge request",
    ("ORCHESTRATOR_GITLAB_PROJECT", "ORCHESTRATOR_GITLAB_URL", "ORCHESTRATOR_GITLAB_PUSH_URL"),
)  # fmt: skip


# The stage modules that open requests on a hosted forge, and so need its token; the
# empty tuple: ``open_pr`` opens them on whichever forge a ticket's ``[origin]`` names,
# that is on the forges of the configured ``[[sources]]``.
FORGE_STAGE_MODULES: Final[Mapping[str, tuple[HostedForge, ...]]] = {
    "orchestrator.stages.open_pr_github": (GITHUB,),
    "orchestrator.stages.open_pr_gitlab": (GITLAB,),
    "orchestrator.stages.open_pr": (),
}
_MODULE_END = re.compile(r"[A-Za-z0-9_.]")


def runs_module(command: Sequence[str], module: str) -> bool:
    """Whether ``command`` starts ``module`` (``-m module``, or in a shell line): the name
    whole, so that ``open_pr`` is not found inside ``open_pr_github``."""
    for arg in command:
        start = arg.find(module)
        while start != -1:
            end = start + len(module)
            if end == len(arg) or not _MODULE_END.match(arg, end):
                return True
            start = arg.find(module, end)
    return False


def stage_forges(
    command: Sequence[str] | None, source_forges: Sequence[HostedForge]
) -> tuple[HostedForge, ...]:
    """The hosted forges a stage running ``command`` opens requests on: its module's own,
    or for ``open_pr`` those of ``source_forges`` (the configured sources' forges)."""
    found: list[HostedForge] = []
    for module, forges in FORGE_STAGE_MODULES.items():
        if command is not None and runs_module(command, module):
            found += forges or source_forges
    return tuple(dict.fromkeys(found))


def origin_stage(command: Sequence[str] | None) -> bool:
    """Whether the stage opens its request on the forge a ticket's ``[origin]`` names."""
    return command is not None and any(
        runs_module(command, module) for module, forges in FORGE_STAGE_MODULES.items() if not forges
    )


@dataclass(frozen=True)
class ForgeAnswer:
    """What the forge said to one authenticated request: its HTTP status, or the network
    error that stopped it (``error``, never holding the token)."""

    api_url: str
    status: int | None = None
    error: str | None = None
    # What named that host (``forge_hosts.ForgeLocation.named_by``): said on doctor's line.
    named_by: str = ""


@dataclass(frozen=True)
class ForgeTokenFact:
    """What the ``forge-token`` checks of one hosted forge read: the stages that open its
    requests, whether its token is set, and the forge's answer to it (None: not asked:
    DRY_RUN, no stage, opted out)."""

    stages: Sequence[GitHubFact] = ()
    token_set: bool = False
    answer: ForgeAnswer | None = None


@dataclass(frozen=True)
class SourceFact:
    """One ``[[sources]]`` entry as this machine sees it. A directory source: ``path``
    (resolved) and whether it is a directory. A forge source: ``token_env``, whether it is
    set, and the forge's answer to it (None: not asked)."""

    source_id: str
    kind: str  # directory, github, gitlab
    path: str = ""
    exists: bool = True
    is_dir: bool = True
    forge: HostedForge | None = None
    token_env: str = ""
    token_set: bool = False
    answer: ForgeAnswer | None = None


@dataclass(frozen=True)
class NotifyFact:
    """One ``[[notify]]`` target, without its secret: ``target`` is how it is named (its
    variable or its addresses); ``url_env``/``url_set``/``url_is_http`` for a webhook,
    slack or teams target; ``unset_env`` the credentials' variables an email target names
    that are unset."""

    target: str
    kind: str
    url_env: str | None = None
    url_set: bool = False
    url_is_http: bool = False
    unset_env: tuple[str, ...] = ()
    # Its host is a loopback, link-local or private address (an IP address, or
    # localhost) that its ``allow_private`` does not name: every send would be refused.
    private: bool = False


@dataclass(frozen=True)
class Probed:
    """Something a run depends on, as preflight tried it: ``shown`` names it (a URL
    masked), ``problem`` says why it cannot be used (None: it can)."""

    shown: str
    problem: str | None = None


@dataclass(frozen=True)
class Facts:
    programs: Sequence[ProgramFact] = ()
    engines: Sequence[EngineFact] = ()
    pass_env: Sequence[PassEnvFact] = ()
    recovery_enabled: bool = True
    model_key_env: str = "ANTHROPIC_API_KEY"
    model_key_set: bool = False
    github: ForgeTokenFact = ForgeTokenFact()
    gitlab: ForgeTokenFact = ForgeTokenFact()
    # user.name / user.email as git or the environment give them, and the [git] table's.
    git_identity: Mapping[str, str] = field(default_factory=dict)
    configured_identity: Mapping[str, str] = field(default_factory=dict)
    fallback_identity: Mapping[str, str] = field(default_factory=dict)
    # What runs in bwrap: stages/checks/git calls (needed) and recipes (refused without it).
    sandboxed: Sequence[str] = ()
    recipes_sandboxed: bool = True
    sandbox_problem: str | None = None
    sandbox_remedy: str = ""
    state_dir: Probed = Probed("")
    broker: Probed | None = None  # the broker's URL, masked; None: no broker needed
    # A broker off this machine with neither a password nor TLS (issue 40): refused.
    broker_auth_problem: str | None = None
    # The fleet's signing key (issue 40), when a broker is used; why it cannot sign.
    fleet_key: Probed | None = None
    # The PostgreSQL state store's URL, masked; None: the state dir's files.
    storage: Probed | None = None
    sources: Sequence[SourceFact] = ()
    notify: Sequence[NotifyFact] = ()
    # Stages that open their request on a ticket's [origin] forge, while no source is a forge.
    origin_stages: Sequence[str] = ()
    # The project's playbook directory (issue 44); None: it has none. Its entry files, the
    # promoted ones, and each file that is not an entry (its path and bad key).
    playbook: str | None = None
    playbook_entries: int = 0
    playbook_promoted: int = 0
    playbook_problems: Sequence[str] = ()


def program_checks(facts: Facts) -> list[Check]:
    checks = []
    for fact in facts.programs:
        if fact.later:
            checks.append(Check("program", "skip", f"{fact.where}: {fact.program} is "
                                "checked when the clone exists"))  # fmt: skip
        elif fact.found is None:
            fix = (
                f"make {fact.program} executable, or correct the command"
                if "/" in fact.program
                else f"install {fact.program}, or put its directory on PATH (the stage's PATH "
                "is this one, with the orchestrator's interpreter's directory first)"
            )
            checks.append(Check("program", "fail", f"{fact.where}: {fact.program} not found", fix))
        else:
            at = f" ({fact.found})" if fact.found != fact.program else ""
            checks.append(Check("program", "ok", f"{fact.where}: {fact.program}{at}"))
    return checks


def readable_fix(fact: EngineFact) -> str:
    """The ``readable`` line that shows what the sandbox hides of an engine's program:
    the whole line when the stage has none, else the entries to add to its own."""
    quoted = ", ".join(f'"{path}"' for path in fact.readable)
    if not fact.declared:
        return f"add readable = [{quoted}] to stage {fact.stage}"
    whole = ", ".join(f'"{path}"' for path in (*fact.declared, *fact.readable))
    return f"add {quoted} to stage {fact.stage}'s readable: readable = [{whole}]"


def engine_check(fact: EngineFact) -> Check:
    """One ``engine`` check: the program is there in the engine's sandbox, and (where
    ``orchestrator doctor`` started it) it starts."""
    said = f"{fact.where}: {fact.program}"
    outside = "" if fact.sandboxed else ' (unsandboxed: sandbox = "none")'
    if fact.kind == "patch":
        return Check("engine", "ok", f"{fact.where}: the orchestrator applies the patch "
                     "itself: nothing to start")  # fmt: skip
    if fact.later:
        return Check("engine", "skip", f"{said} is checked when the clone exists")
    if fact.found is None:
        fix = (
            f"make {fact.program} executable, or correct the command"
            if "/" in fact.program
            else f"install {fact.program}, or put its directory on PATH (the stage's PATH "
            "is this one, with the orchestrator's interpreter's directory first)"
        )
        return Check("engine", "fail", f"{said} not found{outside}", fix)
    at = f" ({fact.found})" if fact.found != fact.program else ""
    if fact.hidden:
        lead = f" → {fact.resolved}" if fact.resolved and fact.resolved != fact.found else ""
        return Check("engine", "fail", f"{said} is {fact.found}{lead}; its sandbox hides "
                     f"{', '.join(fact.hidden)}: an attempt cannot start it",
                     readable_fix(fact))  # fmt: skip
    probe = fact.probe
    there = "in its sandbox" if fact.sandboxed else outside.strip()
    if probe is None:
        why = f" ({fact.not_started})" if fact.not_started else ""
        return Check("engine", "ok", f"{said}{at} is there {there}{why}")
    shown = " ".join(fact.argv)
    if probe.ok:
        words = f": {probe.said}" if probe.said else ""
        return Check("engine", "ok", f"{said}{at} starts {there}{words}")
    if probe.timed_out:
        how = f"did not end within {probe.timeout_s:g} s"
    else:
        how = f"failed (exit {probe.exit_code})"
    words = f": {probe.said}" if probe.said else ""
    hint = (
        "run it by hand to see why; files of its install the sandbox hides (a library, "
        "its node_modules or its venv) go in the stage's readable = [...]"
        if fact.sandboxed
        else "run it by hand to see why"
    )
    return Check("engine", "fail", f"{said}{at}: `{shown}` {how}{outside}{words}", hint)


def engine_checks(facts: Facts) -> list[Check]:
    return [engine_check(fact) for fact in facts.engines]


def pass_env_checks(facts: Facts) -> list[Check]:
    checks = []
    for fact in facts.pass_env:
        said = f"{fact.who}: ${fact.name}"
        fix = f"export {fact.name}=…, or remove it from pass_env"
        if fact.is_set:
            checks.append(Check("pass_env", "ok", f"{said} is set"))
        elif fact.blocked_by_dry_run:  # the stage will not run now: needed once it may
            checks.append(Check("pass_env", "warn", f"{said} is not set; DRY_RUN blocks the "
                                "stage now, which needs it once DRY_RUN=false", fix))  # fmt: skip
        else:
            checks.append(Check("pass_env", "fail", f"{said} is not set (pass_env names it)", fix))
    return checks


def model_key_check(facts: Facts) -> Check:
    if not facts.recovery_enabled:
        return Check("model-key", "skip", "recovery is off: no model is asked")
    if facts.model_key_set:
        return Check("model-key", "ok", f"${facts.model_key_env} is set")
    return Check(
        "model-key",
        "warn",
        f"${facts.model_key_env} is not set: a failed stage goes to a person without a diagnosis",
        f"export {facts.model_key_env}=… (or [model] api_key_env names another variable)",
    )


def forge_checks(facts: Facts) -> list[Check]:
    hosted = ((GITHUB, facts.github), (GITLAB, facts.gitlab))
    checks = [check for forge, fact in hosted if fact.stages for check in token_checks(forge, fact)]
    checks += [
        Check("forge-token", "skip", f"stage {stage} opens its request on the forge a ticket's "
              "[origin] names, and no [[sources]] is a forge (GitHub or GitLab)")
        for stage in facts.origin_stages
    ]  # fmt: skip
    return checks or [Check("forge-token", "skip", "no stage opens a pull request on a forge")]


def token_checks(forge: HostedForge, fact: ForgeTokenFact) -> list[Check]:
    """The ``forge-token`` checks of ``forge``'s stages: passed, set, accepted."""
    checks = []
    name, env, request = forge.name, forge.token_env, forge.request
    for stage in fact.stages:
        if not stage.passes_token:
            checks.append(Check("forge-token", "fail", f"stage {stage.stage} opens a {name} "
                                f"{request}, but {env} is not in its pass_env",
                                f'add pass_env = ["{env}"] to stage {stage.stage}'))  # fmt: skip
        for var in stage.unpassed:
            checks.append(Check("forge-token", "warn", f"${var} is set, but stage {stage.stage}"
                                " does not name it in pass_env: the stage will not see it",
                                f'add "{var}" to stage {stage.stage}\'s pass_env, or unset it'))  # fmt: skip
    needed = [s.stage for s in fact.stages if not s.blocked_by_dry_run]
    if not fact.token_set:
        if needed:
            checks.append(Check("forge-token", "fail", f"${env} is not set (stage "
                                f"{', '.join(needed)} pushes and opens a {request})",
                                f"export {env}=… (a token that may push to the repository "
                                f"and open {request}s)"))  # fmt: skip
        else:
            checks.append(Check("forge-token", "warn", f"${env} is not set; DRY_RUN "
                                f"blocks the {name} stage now, which needs it once DRY_RUN=false",
                                f"export {env}=… before running with DRY_RUN=false"))  # fmt: skip
        return checks
    if fact.answer is None:
        checks.append(Check("forge-token", "ok", f"${env} is set (not tried: DRY_RUN "
                            "is armed)" if not needed else f"${env} is set"))  # fmt: skip
    else:
        key = "api_url" if forge is GITHUB else "base_url"
        where = f"the {name} source's {key} (without one, ${forge.url_env})"
        checks.append(answered("forge-token", "", env, fact.answer, where,
                               f"may push and open {request}s"))  # fmt: skip
    return checks


def answered(name: str, said: str, env: str, answer: ForgeAnswer, url_key: str, may: str) -> Check:
    """What a forge's answer to the token in ``env`` means: unreachable or refused (401,
    403) fail, accepted (2xx) is ok, anything else warns. ``said`` prefixes the detail
    ("source gh-x: "), ``url_key`` is where the forge's URL is set, ``may`` what the token
    must be allowed. The host asked is named, and what named it (issue 43)."""
    host = answer.api_url + (f" ({answer.named_by})" if answer.named_by else "")
    if answer.error is not None:
        return Check(name, "fail", f"{said}cannot reach {host}: {answer.error}",
                     f"check the network, or {url_key}")  # fmt: skip
    if answer.status in (401, 403):
        return Check(name, "fail", f"{said}{host} refused ${env} (HTTP "
                     f"{answer.status})", f"export a {env} that is valid and {may}")  # fmt: skip
    if answer.status is not None and 200 <= answer.status < 300:
        return Check(name, "ok", f"{said}${env} accepted by {host}")
    return Check(name, "warn", f"{said}{host} answered HTTP {answer.status} to the "
                 "token check", "run `orchestrator doctor` again later; if it persists, "
                 f"check {url_key}")  # fmt: skip


def source_checks(facts: Facts) -> list[Check]:
    """One ``source`` check per ``[[sources]]`` entry: its directory is there, or its
    forge accepts its token (asked even under DRY_RUN: reading issues changes nothing)."""
    checks = []
    for source in facts.sources:
        said = f"{source.source_id}: "
        if source.forge is None:
            if source.exists and source.is_dir:
                checks.append(Check("source", "ok", f"{said}{source.path} is a directory"))
                continue
            problem = "is not a directory" if source.exists else "does not exist"
            checks.append(Check("source", "fail", f"{said}{source.path} {problem}",
                                "create the directory, or correct the source's path "
                                "(relative to the config's directory)"))  # fmt: skip
            continue
        env, name = source.token_env, source.forge.name
        url_key = f"the source's {'api_url' if source.forge is GITHUB else 'base_url'}"
        if not source.token_set:
            checks.append(Check("source", "fail", f"{said}${env} is not set (the token its "
                                f"{name} issues are read with)", f"export {env}=… (a token "
                                "that may read the issues), or name another variable in "
                                "its token_env"))  # fmt: skip
        elif source.answer is None:
            checks.append(Check("source", "ok", f"{said}${env} is set (not tried)"))
        else:
            checks.append(answered("source", said, env, source.answer, url_key,
                                   "may read the issues"))  # fmt: skip
    return checks


def notify_checks(facts: Facts) -> list[Check]:
    """One ``notify`` check per ``[[notify]]`` target. A notification never blocks a run,
    so these warn at most; nothing is sent, and a URL (a secret) is never shown: only the
    name of its variable."""
    checks = []
    for target in facts.notify:
        env = target.url_env
        if env is not None:
            said = f"{target.kind} ${env}"
            if not target.url_set:
                checks.append(Check("notify", "warn", f"{said} is not set: nothing can be sent "
                                    "there", f"export {env}=… (the URL to post to)"))  # fmt: skip
            elif not target.url_is_http:
                checks.append(Check("notify", "warn", f"{said} is not an http(s) URL: nothing "
                                    "can be sent there", f"set {env} to the https://… URL to "
                                    "post to"))  # fmt: skip
            else:
                checks.append(Check("notify", "ok", f"{said} is set (nothing sent)"))
        elif target.unset_env:
            names = ", ".join(f"${name}" for name in target.unset_env)
            checks.append(Check("notify", "warn", f"{target.target}: {names} not set: the "
                                "SMTP login will fail", "export "
                                + ", ".join(f"{name}=…" for name in target.unset_env)
                                + ", or remove username_env/password_env"))  # fmt: skip
        else:
            checks.append(Check("notify", "ok", f"{target.target} (nothing sent)"))
        if target.private:
            said = f"{target.kind} ${env}" if env is not None else target.target
            checks.append(Check("notify", "warn", f"{said}: its host is a loopback, "
                                "link-local or private address its allow_private does not "
                                "name: every send will be refused", "if it is yours, add "
                                'allow_private = ["HOST[:PORT]"] to the target'))  # fmt: skip
    return checks


def identity_check(facts: Facts) -> Check:
    keys = ("name", "email")
    if all(facts.git_identity.get(key) for key in keys):
        shown = f"{facts.git_identity['name']} <{facts.git_identity['email']}>"
        return Check("git-identity", "ok", f"commits by {shown} (git config)")
    chosen = {
        key: facts.git_identity.get(key)
        or facts.configured_identity.get(key)
        or facts.fallback_identity.get(key, "")
        for key in keys
    }
    shown = f"{chosen['name']} <{chosen['email']}>"
    fallback = [
        key for key in keys
        if not facts.git_identity.get(key) and not facts.configured_identity.get(key)
    ]  # fmt: skip
    if not fallback:
        return Check("git-identity", "ok", f"commits by {shown} ([git] in config)")
    missing = " and ".join(f"user.{key}" for key in fallback)
    return Check(
        "git-identity",
        "warn",
        f"no {missing} in git config or [git]: commits by {shown} (the fallback identity)",
        "git config --global user.name/user.email, or [git] author_name/author_email in "
        "config.toml",
    )


def sandbox_check(facts: Facts) -> Check:
    if not facts.sandboxed and not facts.recipes_sandboxed:
        return Check("sandbox", "skip", 'nothing runs in the sandbox (sandbox = "none")')
    if facts.sandbox_problem is None:
        return Check("sandbox", "ok", "bwrap can start here")
    if facts.sandboxed:
        shown = ", ".join(facts.sandboxed[:3]) + (" …" if len(facts.sandboxed) > 3 else "")
        return Check(
            "sandbox",
            "fail",
            f"the sandbox cannot start here ({facts.sandbox_problem}); it is needed by {shown}",
            f'{facts.sandbox_remedy}; or opt out per stage/check with sandbox = "none"',
        )
    # Only recipes need it: a run goes on, and a recipe is refused with this reason.
    return Check(
        "sandbox",
        "warn",
        f"the sandbox cannot start here ({facts.sandbox_problem}): mechanical-fix recipes "
        "will be refused",
        f'{facts.sandbox_remedy}; or [recovery] recipe_sandbox = "none"',
    )


STATE_DIR_FIX = "make it a writable directory, or point state_dir (or --state-dir) elsewhere"
BROKER_FIX = "start Redis there, or set ORCHESTRATOR_BROKER_URL / [distributed] broker_url"


def probed_check(
    name: str, probed: Probed | None, skip: str, ok: str, fail: str, fix: str
) -> Check:
    """Skipped when nothing was tried (``probed`` None), else ok or failed with ``fix``;
    ``ok`` and ``fail`` are templates of ``{shown}`` (and ``{problem}``)."""
    if probed is None:
        return Check(name, "skip", skip)
    if probed.problem is None:
        return Check(name, "ok", ok.format(shown=probed.shown))
    return Check(name, "fail", fail.format(shown=probed.shown, problem=probed.problem), fix)


def state_dir_check(facts: Facts) -> Check:
    return probed_check("state-dir", facts.state_dir, "", "{shown} is writable",
                        "{shown}: {problem}", STATE_DIR_FIX)  # fmt: skip


STORAGE_FIX = (
    "start PostgreSQL there (or fix the URL, $PGPASSWORD or ~/.pgpass), or unset "
    "ORCHESTRATOR_STORAGE_URL / [storage] url to keep the state in files"
)


def storage_check(facts: Facts) -> Check:
    return probed_check("storage", facts.storage, "the state dir's files (no [storage] url)",
                        "{shown} answers; its schema is up to date", "{shown}: {problem}",
                        STORAGE_FIX)  # fmt: skip


def broker_check(facts: Facts) -> Check:
    if facts.broker is not None and facts.broker_auth_problem is not None:
        detail = facts.broker_auth_problem.removesuffix(f"; {AUTH_FIX}")
        return Check("broker", "fail", detail, AUTH_FIX)
    return probed_check("broker", facts.broker, "no broker needed (only batch --backend celery "
                        "uses one)", "{shown} answers", "{shown} unreachable: {problem}",
                        BROKER_FIX)  # fmt: skip


FLEET_KEY_FIX = (
    "run `orchestrator fleet keygen` once and copy fleet.key and fleet.crt (mode 0600) to "
    "every machine of the fleet"
)


def fleet_key_check(facts: Facts) -> Check:
    return probed_check("fleet-key", facts.fleet_key, "no broker, no task message to sign",
                        "{shown} signs the fleet's task messages", "{problem}", FLEET_KEY_FIX)  # fmt: skip


PLAYBOOK_FIX = "fix the key named, or remove the file (`orchestrator playbook list` re-reads it)"


def playbook_checks(facts: Facts) -> list[Check]:
    """A project with a playbook: how many entries, and each file that is not one (a run
    goes on without it: a warning). No line for a project without one."""
    if facts.playbook is None:
        return []
    if facts.playbook_problems:
        return [
            Check("playbook", "warn", problem, PLAYBOOK_FIX) for problem in facts.playbook_problems
        ]
    said = f"{facts.playbook}: {facts.playbook_entries} entries, {facts.playbook_promoted} promoted"
    return [Check("playbook", "ok", said)]


def checklist(facts: Facts) -> tuple[Check, ...]:
    """Every check, in the order a person fixes things: the machine, then the config."""
    return (
        state_dir_check(facts),
        storage_check(facts),
        *program_checks(facts),
        *engine_checks(facts),
        *pass_env_checks(facts),
        sandbox_check(facts),
        *source_checks(facts),
        *forge_checks(facts),
        model_key_check(facts),
        identity_check(facts),
        broker_check(facts),
        fleet_key_check(facts),
        *notify_checks(facts),
        *playbook_checks(facts),
    )


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.status == "fail"]


def warned(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if c.status == "warn"]


def line(check: Check) -> str:
    """``✗ program: stage x: foo not found — fix: install foo, …``"""
    fix = f" — fix: {check.fix}" if check.fix and check.status in ("warn", "fail") else ""
    return f"{MARKS[check.status]} {check.name}: {check.detail}{fix}"
