"""Preflight, the use case: gather the facts a run depends on — programs on the PATH each
stage will see, ``pass_env`` variables, the model key, the GitHub and GitLab tokens
(and, unless DRY_RUN is armed, the forge's answer to each), git's identity, the sandbox,
the state dir, the broker — for the checklist (``domain/preflight.checklist`` holds the rules).

Commands are expanded exactly as the runner expands them (``stage_env.expand_command``,
each engine adapter's ``invocation``), with the clone and run directory standing in:
a program under either is there only once the run is, so it is checked then. Nothing
here creates a run, a ledger row or a charge; the one process it starts (``git config``,
for the identity) and the sandbox probe go through the runner like every other.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from orchestrator.app.engine_probe import (
    PROBE_TIMEOUT_S,
    EngineProbes,
    locate_program,
    shown_program,
    stand_in_context,
)
from orchestrator.domain.config import LoadedConfig
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.forge_hosts import PUBLIC_API, forge_api, forge_location, source_api
from orchestrator.domain.git_identity import (
    FALLBACK_IDENTITY,
    configured_identity,
    identity_environ,
)
from orchestrator.domain.lifecycle import dry_run_armed
from orchestrator.domain.notify import NotifyTarget, public_address
from orchestrator.domain.preflight import (
    GITHUB,
    GITLAB,
    Facts,
    ForgeAnswer,
    ForgeTokenFact,
    GitHubFact,
    HostedForge,
    NotifyFact,
    PassEnvFact,
    Probed,
    ProgramFact,
    SourceFact,
    origin_stage,
    stage_forges,
)
from orchestrator.domain.sources import DirectorySource, ForgeSource, GitHubSource
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.sandbox import REMEDY, BwrapLocator, bundled_bwrap, sandbox_available
from orchestrator.execution.stage_env import expand_command, stage_environ
from orchestrator.execution.stage_sandbox import config_identity
from orchestrator.storage import state_dir_problem

Backend = Literal["local", "celery", "doctor"]
# GET url with headers → the HTTP status (a network failure raises OSError).
Send = Callable[[str, Mapping[str, str]], int]

HOSTED = (GITHUB, GITLAB)
FORGE_TIMEOUT_S = 10.0
BROKER_TIMEOUT_S = 2.0


def programs(loaded: LoadedConfig, environ: Mapping[str, str]) -> list[ProgramFact]:
    """The program of every stage and check command, looked for on its stage's PATH (an
    engine's: ``engine_probe``, in its sandbox)."""
    facts = []
    for stage in loaded.config.stages:
        ctx = stand_in_context(stage.name)
        engine_env = loaded.config.engines[stage.engine].pass_env if stage.engine else ()
        path = stage_environ(environ, ctx, (*stage.pass_env, *engine_env)).get("PATH", "")
        commands: list[tuple[str, str]] = []
        if stage.command is not None:
            commands.append((f"stage {stage.name}", stage.command[0]))
        for check in stage.checks:
            commands.append((f"check {stage.name}:{check.name}", check.command[0]))
        expanded = [
            (where, expand_command((argv0,), root=loaded.root, ctx=ctx)[0])
            for where, argv0 in commands
        ]
        for where, program in expanded:
            found, later = locate_program(program, path)
            facts.append(ProgramFact(where, shown_program(program), found, later))
    return facts


def pass_env(loaded: LoadedConfig, environ: Mapping[str, str]) -> list[PassEnvFact]:
    """Every variable a ``pass_env`` names but a forge stage's token (``forge-token``
    says more about that one)."""
    armed = dry_run_armed(environ)
    named: dict[tuple[str, str], PassEnvFact] = {}
    for stage in loaded.config.stages:
        blocked = stage.side_effectful and armed
        # An ``open_pr`` stage may need either forge's token: forge-token speaks for both.
        tokens = {forge.token_env for forge in stage_forges(stage.command, HOSTED)}
        engine = loaded.config.engines[stage.engine] if stage.engine is not None else None
        for who, names in ((f"stage {stage.name}", stage.pass_env),
                           (f"engine {stage.engine}", engine.pass_env if engine else ())):  # fmt: skip
            for name in names:
                if name not in tokens:
                    fact = PassEnvFact(who, name, bool(environ.get(name)), blocked)
                    named[(who, name)] = fact
    return list(named.values())


def source_forges(loaded: LoadedConfig) -> tuple[HostedForge, ...]:
    """The hosted forges the ``[[sources]]`` read issues from: where ``open_pr`` opens."""
    kinds = {source.kind for source in loaded.config.sources}
    return tuple(forge for forge in HOSTED if forge.name.lower() in kinds)


def forge_stages(
    loaded: LoadedConfig, environ: Mapping[str, str], forge: HostedForge = GITHUB
) -> list[GitHubFact]:
    """The stages that open ``forge``'s requests: do they pass its token, may they run now."""
    armed = dry_run_armed(environ)
    forges = source_forges(loaded)
    return [
        GitHubFact(
            stage.name,
            forge.token_env in stage.pass_env,
            stage.side_effectful and armed,
            # Where the forge is reaches the stage as a value (stage_hosts.forge_urls).
            tuple(
                v
                for v in forge.overrides
                if environ.get(v) and v not in stage.pass_env and v != forge.url_env
            ),
        )
        for stage in loaded.config.stages
        if forge in stage_forges(stage.command, forges)
    ]


def origin_stages(loaded: LoadedConfig) -> list[str]:
    """The ``open_pr`` stages, when no source is a forge: they have no forge to check."""
    if source_forges(loaded):
        return []
    return [stage.name for stage in loaded.config.stages if origin_stage(stage.command)]


github_stages = forge_stages


def send_get(url: str, headers: Mapping[str, str]) -> int:
    """One GET through the forges' standard-library client (the model SDK's HTTP client
    is the gateway's alone): its HTTP status, whatever it is. A network failure raises
    OSError."""
    from orchestrator.forges.http import UrllibClient

    return UrllibClient(timeout_s=FORGE_TIMEOUT_S).request("GET", url, headers=headers).status_code


def ask_forge_token(
    forge: HostedForge,
    environ: Mapping[str, str],
    send: Send = send_get,
    *,
    api_url: str | None = None,
    token_env: str | None = None,
) -> ForgeAnswer:
    """One authenticated ``GET`` of the token's user, as ``forge``'s stage authenticates
    (its base URL override, its headers): the forge's status, or the network error (token
    scrubbed). A source gives its own ``api_url`` and ``token_env``."""
    if forge is GITHUB:
        from orchestrator.forges.github import request_headers

        public, user = PUBLIC_API["github"], "/user"
    else:
        from orchestrator.forges.gitlab import request_headers

        public, user = PUBLIC_API["gitlab"], "/api/v4/user"
    # As the stage reads it (its override, else the public API), written as given.
    api_url = api_url or environ.get(forge.url_env, "") or public
    token = environ.get(token_env or forge.token_env, "")
    return ask_token(token, api_url, user, request_headers, send)


ask_github = partial(ask_forge_token, GITHUB)
ask_gitlab = partial(ask_forge_token, GITLAB)


def ask_token(
    token: str,
    api_url: str,
    user_path: str,
    headers: Callable[[str], dict[str, str]],
    send: Send,
) -> ForgeAnswer:
    """The forge's status to ``token`` at ``api_url + user_path``, or the network error."""
    try:
        status = send(api_url.rstrip("/") + user_path, headers(token))
    except (OSError, ValueError) as exc:
        said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return ForgeAnswer(api_url, error=said.replace(token, "***") if token else said)
    return ForgeAnswer(api_url, status=status)


AskKey = tuple[HostedForge, str, str]  # the forge, its URL, the token's variable


class ForgeAsker:
    """Asks each forge about each token once per preflight: the stages' check and every
    source that reads the same forge with the same variable share one request. ``want``
    starts a request on a thread of its own (sources on several forges are asked at the
    same time: the wait is the slowest one's, each bounded by ``FORGE_TIMEOUT_S``);
    ``answer`` waits for it."""

    def __init__(self, environ: Mapping[str, str], send: Send, *, workers: int = 8) -> None:
        self._environ, self._send = environ, send
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="preflight-forge")
        self._asked: dict[AskKey, Future[ForgeAnswer]] = {}

    def want(
        self, forge: HostedForge, api_url: str | None = None, token_env: str | None = None
    ) -> AskKey:
        env = token_env or forge.token_env
        url = forge_api("github" if forge is GITHUB else "gitlab", self._environ, api_url or "")
        key = (forge, url, env)
        if key not in self._asked:
            self._asked[key] = self._pool.submit(
                ask_forge_token, forge, self._environ, self._send, api_url=url, token_env=env
            )
        return key

    def answer(self, key: AskKey) -> ForgeAnswer:
        return self._asked[key].result()

    def __call__(
        self, forge: HostedForge, api_url: str | None = None, token_env: str | None = None
    ) -> ForgeAnswer:
        return self.answer(self.want(forge, api_url, token_env))

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def sources(
    loaded: LoadedConfig, environ: Mapping[str, str], ask: ForgeAsker | None
) -> list[SourceFact]:
    """Each ``[[sources]]`` entry: a directory's (relative to the config's directory, as
    intake reads it), a forge's token and its answer (``ask`` None: not asked). Reading
    issues changes nothing, so the forge is asked whatever DRY_RUN says."""
    # Every request is started before any is waited for.
    keys = {
        source.source_id: ask.want(*_forge_of(source), source.token_env)
        for source in loaded.config.sources
        if ask is not None and not isinstance(source, DirectorySource)
        and environ.get(source.token_env)
    }  # fmt: skip
    facts = []
    for source in loaded.config.sources:
        if isinstance(source, DirectorySource):
            path = loaded.root / source.path
            facts.append(SourceFact(source.source_id, source.kind, str(path), path.exists(),
                                    path.is_dir()))  # fmt: skip
            continue
        key = keys.get(source.source_id)
        answer = ask.answer(key) if ask is not None and key is not None else None
        is_set = bool(environ.get(source.token_env))
        facts.append(SourceFact(source.source_id, source.kind, forge=_forge_of(source)[0],
                                token_env=source.token_env, token_set=is_set, answer=answer))  # fmt: skip
    return facts


def _forge_of(source: ForgeSource) -> tuple[HostedForge, str]:
    return (GITHUB if isinstance(source, GitHubSource) else GITLAB), source_api(source)


def _is_http(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def notify_targets(loaded: LoadedConfig, environ: Mapping[str, str]) -> list[NotifyFact]:
    """Each ``[[notify]]`` target as far as it can be judged without sending anything:
    whether its URL's variable is set and holds an http(s) URL (the URL itself is read
    here and goes no further), which of an email target's credentials are unset."""
    facts = []
    for target in loaded.config.notify:
        if target.url_env is not None:
            url = environ.get(target.url_env, "")
            facts.append(NotifyFact(target.name, target.kind, target.url_env, bool(url),
                                    _is_http(url), private=_private_url(url, target)))  # fmt: skip
            continue
        named = (target.username_env, target.password_env)
        unset = tuple(name for name in named if name is not None and not environ.get(name))
        private = _refused(target.smtp_host or "", target.smtp_port, target)
        facts.append(NotifyFact(target.name, target.kind, unset_env=unset, private=private))
    return facts


def _private_url(url: str, target: NotifyTarget) -> bool:
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    return _refused(parts.hostname or "", port, target)


def _refused(host: str, port: int, target: NotifyTarget) -> bool:
    """Whether a send to ``host`` will be refused, as far as can be told without asking
    DNS: an IP address that is not public, or localhost, not named in allow_private."""
    if not host or target.allows_private(host, port):
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return not public_address(host)
    except ValueError:
        return False  # a name: resolved, and checked, when it is sent to


# git's answer per environment it was asked in: a batch's or a test session's many
# preflights ask once (as ``stage_sandbox.global_identity`` does for the stages).
_identities: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}


def git_identity(executor: Executor, environ: Mapping[str, str]) -> dict[str, str]:
    """user.name/user.email as a new clone's commits would get them from git: the
    environment's GIT_AUTHOR_*, else git's system and global config (read by ``git
    config``, which runs nothing). Empty where git says nothing, or is not there."""
    env = {k: v for k, v in environ.items() if k in ("PATH", "HOME", "XDG_CONFIG_HOME")}
    env.update({k: v for k, v in environ.items() if k.startswith("GIT_CONFIG")})
    key = tuple(sorted(env.items()))
    if key not in _identities:
        _identities[key] = config_identity(executor, env, timeout_s=10)
    found = dict(_identities[key])
    found.update({k: v for k, v in environ.items() if k.startswith("GIT_AUTHOR_") and v})
    return {
        key: found[var] for key, var in (("name", "GIT_AUTHOR_NAME"), ("email", "GIT_AUTHOR_EMAIL"))
        if found.get(var)
    }  # fmt: skip


def sandboxed(loaded: LoadedConfig) -> list[str]:
    """What cannot run without bwrap: sandboxed stages and checks, the orchestrator's git."""
    needs = []
    for stage in loaded.config.stages:
        if (stage.sandbox or "bwrap") == "bwrap" and not stage.checks:
            needs.append(f"stage {stage.name}")
        needs += [
            f"check {stage.name}:{check.name}"
            for check in stage.checks
            if (check.sandbox or stage.sandbox or "bwrap") == "bwrap"
        ]
    if loaded.config.sandbox.git == "bwrap":
        needs.append("the orchestrator's git calls")
    return needs


def broker_problem(loaded: LoadedConfig, environ: Mapping[str, str]) -> Probed:
    """The broker, masked, and why it cannot be used."""
    from orchestrator.domain.broker_url import broker_url_from
    from orchestrator.domain.errors import ConfigError, OrchestratorError

    try:
        url = broker_url_from(
            loaded.config.distributed.broker_url, environ, loaded.path, require_auth=False
        )
    except ConfigError as exc:
        return Probed("the broker", str(exc))
    from orchestrator.storage.redis import CoordinationStore

    try:
        store = CoordinationStore(url, timeout_s=BROKER_TIMEOUT_S, retries=0)
    except ImportError as exc:
        return Probed(url.masked, f"the redis client is not installed ({exc.name})")
    try:
        store.ping()
    except OrchestratorError as exc:
        return Probed(url.masked, getattr(exc, "reason", "") or str(exc))
    finally:
        store.close()
    return Probed(url.masked)


def storage_problem(loaded: LoadedConfig, environ: Mapping[str, str]) -> Probed | None:
    """The PostgreSQL state store, masked, and why it cannot be used; None when the state
    is files. Reached and its schema brought up to date (or refused as newer than this
    orchestrator) before anything is spent."""
    from orchestrator.domain.errors import ConfigError, OrchestratorError
    from orchestrator.domain.storage_url import storage_url_from

    try:
        url = storage_url_from(loaded.config.storage.url, environ)
    except ConfigError as exc:
        return Probed("the state store", str(exc))
    if url is None:
        return None
    from orchestrator.storage.postgres import connect, migrate

    try:
        with connect(url.reveal()) as conn:
            migrate(conn)
    except OrchestratorError as exc:
        return Probed(url.masked, getattr(exc, "reason", "") or url.scrub(str(exc)))
    return Probed(url.masked)


def broker_auth_problem(loaded: LoadedConfig, environ: Mapping[str, str]) -> str | None:
    """Why the broker may not be used unauthenticated (off this machine, with neither a
    password nor TLS), or None; a URL that cannot be read is ``broker_problem``'s to say."""
    from orchestrator.domain.broker_url import (
        authentication_problem,
        broker_source,
        broker_url_from,
    )
    from orchestrator.domain.errors import ConfigError

    try:
        url = broker_url_from(
            loaded.config.distributed.broker_url, environ, loaded.path, require_auth=False
        )
    except ConfigError:
        return None
    return authentication_problem(url, broker_source(environ, loaded.path))


def fleet_key_fact(loaded: LoadedConfig) -> Probed:
    """The fleet's key file, and why it cannot sign or verify."""
    from orchestrator.app.fleet_key import fleet_key_files, fleet_key_problem

    fleet = fleet_key_files(loaded)
    return Probed(str(fleet.key), fleet_key_problem(fleet))


def _broker_configured(loaded: LoadedConfig, environ: Mapping[str, str]) -> bool:
    from orchestrator.domain.broker_url import BROKER_URL_ENV

    return bool(environ.get(BROKER_URL_ENV)) or loaded.config.distributed.broker_url is not None


def gather(
    loaded: LoadedConfig,
    state_dir: Path,
    environ: Mapping[str, str],
    *,
    backend: Backend = "local",
    ask_forge: bool = True,
    executor: Executor | None = None,
    locate_bwrap: BwrapLocator = bundled_bwrap,
    send: Send = send_get,
    engine_timeout_s: float = PROBE_TIMEOUT_S,
) -> Facts:
    """The facts the checklist is decided from. ``backend``: ``celery`` needs the broker;
    ``doctor`` tries it when one is configured; ``local`` does not. ``ask_forge``: False
    never asks a forge (the benchmark). ``engine_timeout_s``: how long ``doctor`` waits
    for an engine's ``--version``."""
    config = loaded.config
    executor = executor or LocalExecutor()
    needs_bwrap = sandboxed(loaded)
    recipes_sandboxed = config.recovery.enabled and config.recovery.recipe_sandbox == "bwrap"
    # The probe starts bwrap once, the slowest check: it runs while the others are read.
    probe = _Background(
        (lambda: sandbox_available(executor, locate_bwrap))
        if needs_bwrap or recipes_sandboxed
        else (lambda: None)
    )
    # Each engine's program looked for in its sandbox; ``doctor`` starts it there, the
    # starts running (on threads) while the rest is read.
    engines = EngineProbes(
        loaded, state_dir, environ, executor=executor, locate_bwrap=locate_bwrap,
        start=backend == "doctor", timeout_s=engine_timeout_s,
    )  # fmt: skip
    # Each hosted forge's stages and whether its token is set; its answer is added below.
    tokens = {
        forge: ForgeTokenFact(
            forge_stages(loaded, environ, forge), bool(environ.get(forge.token_env))
        )
        for forge in HOSTED
    }
    ask = ForgeAsker(environ, send) if ask_forge else None

    def asked(forge: HostedForge) -> AskKey | None:
        fact = tokens[forge]
        needed = any(not s.blocked_by_dry_run for s in fact.stages)
        if ask is None or not fact.token_set or not needed:
            return None
        # The host the stage will be handed (issue 43): a source's, the override, the public.
        return ask.want(forge, locations[forge].url)

    locations = {
        forge: forge_location(
            "github" if forge is GITHUB else "gitlab", config.sources, environ, config.stages
        )
        for forge in HOSTED
    }

    # Every forge is asked at once (the stages' tokens, then the sources'), then waited for.
    keys = {forge: asked(forge) for forge in HOSTED}
    try:
        source_facts = sources(loaded, environ, ask)
        for forge, key in keys.items():
            if ask is not None and key is not None:
                answer = replace(ask.answer(key), named_by=locations[forge].named_by)
                tokens[forge] = replace(tokens[forge], answer=answer)
    finally:
        if ask is not None:
            ask.close()
    broker, broker_open, fleet_key = None, None, None
    if backend == "celery" or (backend == "doctor" and _broker_configured(loaded, environ)):
        broker_open = broker_auth_problem(loaded, environ)
        # A broker that must not be used is not asked anything either.
        broker = Probed("the broker") if broker_open else broker_problem(loaded, environ)
        fleet_key = fleet_key_fact(loaded)
    storage = storage_problem(loaded, environ)
    found_programs = programs(loaded, environ)
    identity = git_identity(executor, environ)
    return Facts(
        programs=found_programs,
        engines=engines.facts(),
        pass_env=pass_env(loaded, environ),
        recovery_enabled=config.recovery.enabled,
        model_key_env=config.model.api_key_env,
        model_key_set=bool(environ.get(config.model.api_key_env)),
        github=tokens[GITHUB],
        gitlab=tokens[GITLAB],
        git_identity=identity,
        configured_identity=configured_identity(
            {**environ, **identity_environ(config.git.author_name, config.git.author_email)}
        ),
        fallback_identity=FALLBACK_IDENTITY,
        sandboxed=needs_bwrap,
        recipes_sandboxed=recipes_sandboxed,
        sandbox_problem=probe.result(),
        sandbox_remedy=REMEDY,
        state_dir=Probed(str(state_dir), state_dir_problem(state_dir)),
        broker=broker,
        broker_auth_problem=broker_open,
        fleet_key=fleet_key,
        storage=storage,
        sources=source_facts,
        notify=notify_targets(loaded, environ),
        origin_stages=origin_stages(loaded),
        **playbook_facts(loaded),
    )


def playbook_facts(loaded: LoadedConfig) -> dict[str, Any]:
    """What ``doctor`` says of the project's playbook (issue 44): every file read again
    (a rescan: one edited in place too), each that is not an entry named."""
    # The store alone (app.playbook's store_for is this constructor): app.playbook loads
    # the playbook's matcher and the log readers, ~90 ms of doctor's start for nothing.
    from orchestrator.storage.playbook import PlaybookStore

    store = PlaybookStore(loaded.root)
    if not store.dir.is_dir():
        return {}
    problems: list[str] = []
    try:
        index = store.index(on_error=lambda exc: problems.append(str(exc)), rescan=True)
    except ConfigError as exc:
        return {"playbook": str(store.dir), "playbook_problems": (str(exc),)}
    return {
        "playbook": str(store.dir),
        "playbook_entries": len(index.files),
        "playbook_promoted": len(index.decide) + len(index.patterns),
        "playbook_problems": tuple(problems),
    }


class _Background:
    """``work()`` on a thread of its own; ``result()`` waits for it and re-raises what it
    raised (a probe that crashed must not read as a sandbox that works)."""

    def __init__(self, work: Callable[[], str | None]) -> None:
        self._answer: list[str | None] = []
        self._raised: list[BaseException] = []

        def run() -> None:
            try:
                self._answer.append(work())
            except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread)
                self._raised.append(exc)

        self._thread = threading.Thread(target=run, name="preflight-sandbox-probe", daemon=True)
        self._thread.start()

    def result(self) -> str | None:
        self._thread.join()
        if self._raised:
            raise self._raised[0]
        return self._answer[0]
