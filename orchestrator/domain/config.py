"""config.toml → frozen, validated models. Load once; every error names the file and the key."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    RootModel,
    model_validator,
)

from orchestrator.domain.broker_url import ConfiguredBrokerUrl
from orchestrator.domain.egress import EgressEntries
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.keys import ORCHESTRATOR_ONLY
from orchestrator.domain.notify import NotifyTarget
from orchestrator.domain.placeholders import placeholder_problems
from orchestrator.domain.sandbox import SandboxConfig, SandboxOptions
from orchestrator.domain.sources import HttpUrl, Source
from orchestrator.domain.storage_url import ConfiguredStorageUrl
from orchestrator.domain.validation import (
    Argv,
    Frozen,
    Name,
    NonEmptyStr,
    PositiveSeconds,
    StrictBool,
    StrictInt,
    StrictStr,
    named,
    toml_model,
)

DEFAULT_STATE_DIR = ".state"

Cap = Annotated[StrictInt, Field(ge=0, le=100)]
EnvName = Annotated[StrictStr, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
TicketKindName = Annotated[StrictStr, Field(min_length=1, max_length=64)]


def _not_the_orchestrators_keys(names: tuple[str, ...]) -> tuple[str, ...]:
    kept = sorted(ORCHESTRATOR_ONLY.intersection(names))
    if kept:
        raise ValueError(
            f"names {', '.join(kept)}: the orchestrator's own keys are never handed to a "
            "stage (with them it could rewrite the ledger or sign its own approval)"
        )
    return names


# Secret-looking variables a stage or engine may see; the orchestrator's keys never.
PassEnv = Annotated[
    tuple[EnvName, ...], Field(max_length=32), AfterValidator(_not_the_orchestrators_keys)
]


def _inside_clone_glob(glob: str) -> str:
    if glob.startswith("/") or ".." in glob.split("/"):
        raise ValueError(f"{glob!r} must be relative to the clone, without '..'")
    return glob


ProtectedGlob = Annotated[
    StrictStr, Field(min_length=1, max_length=256), AfterValidator(_inside_clone_glob)
]


def _report_glob(glob: str) -> str:
    if "\x00" in glob:
        raise ValueError(f"{glob!r} holds a NUL character")
    return _inside_clone_glob(glob)


ReportGlob = Annotated[StrictStr, Field(min_length=1, max_length=256), AfterValidator(_report_glob)]
ByteCap = Annotated[StrictInt, Field(ge=256, le=16 * 1024 * 1024)]
# How far back from a log's end its root-cause lines are looked for: read in chunks, so
# memory does not grow with it, only time (about 0.1 s per 64 MiB).
ScanWindow = Annotated[StrictInt, Field(ge=4096, le=16 * 1024 * 1024 * 1024)]


class ContextLimits(Frozen):
    """Byte caps on each part of the context bundle, and on the whole bundle: they keep
    the prompt, and so the cost of a diagnosis, bounded whatever the failure's size."""

    max_run_state_bytes: ByteCap = 8 * 1024
    max_run_record_bytes: ByteCap = 8 * 1024
    max_ticket_bytes: ByteCap = 16 * 1024
    max_log_tail_bytes: ByteCap = 16 * 1024
    # The root-cause excerpts (with line numbers) found anywhere in the scan window.
    max_evidence_bytes: ByteCap = 8 * 1024
    evidence_scan_bytes: ScanWindow = 64 * 1024 * 1024
    max_check_output_bytes: ByteCap = 16 * 1024
    max_diff_bytes: ByteCap = 48 * 1024
    max_bundle_bytes: ByteCap = 96 * 1024


class RecoveryConfig(Frozen):
    """Caps on the recovery loop, per ticket across all of its runs, and what a
    mechanical-fix recipe may run."""

    # Off: a failed stage ends the ticket ``failed`` with its typed reason, nothing decided.
    enabled: StrictBool = True
    max_diag_invocations_per_ticket: Cap = 2
    max_retries_per_ticket: Cap = 2
    # Infrastructure failures (rate limits, outages, engine crashes) are retried without
    # asking the model, after a back-off that doubles from ``infra_backoff_s``.
    max_infra_retries_per_ticket: Cap = 3
    infra_backoff_s: Annotated[float, Field(strict=True, ge=0.0, le=3600.0)] = 30.0
    # How long one forge request (a list, a comment, a pull request) waits out a rate
    # limit the forge names (Retry-After, a reset time) before it fails ``rate_limited``
    # and the ticket waits for a later batch (issue 43).
    forge_max_wait_s: Annotated[float, Field(strict=True, ge=0.0, le=3600.0)] = 60.0
    # Once the infra back-off (``infra_backoff_s``) is used up, an outage of the forge,
    # the model provider or the network (rate_limited, outage, network) puts the run in
    # ``waiting-infra`` for the next batch, its caps untouched; an outage older than this
    # many hours stops it ``needs-human`` (``infra_wait_expired``) and a person is told
    # (issue 43).
    infra_wait_max_h: Annotated[float, Field(strict=True, ge=0.0, le=24.0 * 90)] = 24.0
    # Re-asks after a reply that failed validation (not after API errors).
    max_reasks: Annotated[StrictInt, Field(ge=0, le=3)] = 1
    recipe_allowlist: Annotated[tuple[Name, ...], Field(max_length=32)] = ("git",)
    recipe_command_timeout_s: PositiveSeconds = 60.0
    # "bwrap": every recipe command runs in a sandbox where the clone is the only writable
    # path, with no network; a machine that cannot start it refuses the recipe. "none" is
    # the explicit opt-out, recorded in every mechanical-fix report it affects.
    recipe_sandbox: Literal["bwrap", "none"] = "bwrap"
    # An engine re-run after a code failure (retry, escalate-model, switch-engine) is
    # told what failed: the check, its failure reading, the verdict, the previous change.
    # False: it gets the ticket's prompt unchanged, as the first attempt did.
    engine_feedback: StrictBool = True
    context: ContextLimits = ContextLimits()


Threshold = Annotated[float, Field(strict=True, ge=0.0, le=1.0)]


class RoutingConfig(RootModel[dict[str, Threshold]]):
    """Per action: the confidence at or above which a verdict is carried out without a
    person. Within 0.2 below it a person is asked with the proposal pre-filled
    (``hitl_recommended``); lower, a person must decide (``hitl_required``). Conservative:
    a model's verdict with no track record lands just under these, so a person sees it;
    a playbook entry or a recipe that went green before clears them.

    The keys are the action names and the defaults each action's own (the action
    vocabulary's): ``[routing]`` sets only the ones it names."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="after")
    def _known_actions(self) -> RoutingConfig:
        # Here, not at the top: the verdict models cost a parse of their schemas.
        from orchestrator.domain.vocabulary import VOCABULARY

        for key in self.root:
            if key not in VOCABULARY:
                raise ValueError(
                    f"unknown key {key!r}: not an action (one of: {', '.join(VOCABULARY.names())})"
                )
        return self

    def by_action(self) -> dict[str, float]:
        """Every action's threshold: the configured one, else the action's default."""
        from orchestrator.domain.vocabulary import VOCABULARY

        return {**VOCABULARY.routing_defaults(), **self.root}


class JudgeConfig(Frozen):
    """An optional second-model review, on a deterministic sample of model verdicts. Its
    call counts against the diagnosis cap; its agreement feeds confidence."""

    sample_rate: Threshold = 0.0


class DiagnosisConfig(Frozen):
    """``single``: one model call (the default). ``investigate``: a bounded loop in which
    the model may call read-only tools from the allow-list before it decides."""

    mode: Literal["single", "investigate"] = "single"
    max_steps: Annotated[StrictInt, Field(ge=1, le=20)] = 6
    tools: Annotated[tuple[Name, ...], Field(max_length=16)] = ("read_file", "git_log", "grep")


Money = Annotated[float, Field(strict=True, ge=0.0, le=1_000_000.0)]


class PriceConfig(Frozen):
    """What a model costs, in US dollars per million tokens (for budget estimates)."""

    input_per_mtok: Money
    output_per_mtok: Money

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        """What ``input_tokens`` in and ``output_tokens`` out cost at these prices."""
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


class BatchConfig(Frozen):
    """Caps on one batch's model use, checked before each call; 0 means no cap. Once a
    cap is reached the batch's remaining diagnoses become synthetic abandon-human."""

    max_model_calls: Annotated[StrictInt, Field(ge=0, le=1_000_000)] = 0
    max_tokens: Annotated[StrictInt, Field(ge=0, le=10_000_000_000)] = 0
    max_cost_usd: Money = 0.0


class LogsConfig(Frozen):
    """How much of one stage command's output its log keeps on disk: the first half of
    ``max_bytes`` and the last half, with a line between them saying how many bytes were
    dropped. The stage itself runs on undisturbed."""

    max_bytes: Annotated[StrictInt, Field(ge=64 * 1024, le=1 << 40)] = 64 * 1024 * 1024


class DistributedConfig(Frozen):
    """Where a fleet of workers coordinates: a Redis server that is Celery's broker and
    holds the ticket leases, the ledger lock and the fleet's budget. ``broker_url`` may be
    overridden by ``$ORCHESTRATOR_BROKER_URL``; its password is never printed or written
    (every rendering of it is masked). ``namespace`` prefixes every key, so several
    projects can share one Redis."""

    broker_url: ConfiguredBrokerUrl | None = None
    namespace: Name = "orchestrator"
    # How long an unacknowledged ticket stays with its worker before Redis hands it to
    # another: longer than the longest ticket (six hours by default).
    visibility_timeout_s: PositiveSeconds = 6 * 3600.0
    # A worker's claim on a ticket, renewed by its heartbeat: how soon a lost worker's
    # ticket can be taken over.
    lease_s: PositiveSeconds = 60.0
    # While a batch waits for its tickets: how long Redis may stay unreachable before the
    # batch gives up (exit 75; the workers go on, and the same batch run again collects
    # the answers), and how often a task no worker has started is looked for in the queue
    # and among the workers' messages (missing at two looks in a row, the broker lost its
    # message: it is queued again).
    outage_wait_s: PositiveSeconds = 300.0
    lost_task_check_s: PositiveSeconds = 30.0
    # The fleet's signing key and its certificate (issue 40): every task message is
    # signed with the key and a worker runs only what the certificate verifies. Relative
    # to this file's directory; ``orchestrator fleet keygen`` makes them (mode 0600).
    fleet_key: NonEmptyStr = "fleet.key"
    fleet_certificate: NonEmptyStr = "fleet.crt"


class PlaybookConfig(Frozen):
    """When a learned playbook entry decides without a person (issue 44). ``promote_after``
    0: only a person promotes an entry (``orchestrator playbook promote``, or a comment
    where approvals by comment are on); N: an entry is promoted once N proven outcomes
    agree with it (the one that proposed it counts)."""

    promote_after: Annotated[StrictInt, Field(ge=0, le=1000)] = 0


class StorageConfig(Frozen):
    """Where the state is kept. Unset: the state dir's files, the default. A
    ``postgresql://`` URL (``$ORCHESTRATOR_STORAGE_URL`` overrides it): run records,
    decisions, approvals, budgets, batches, the ledger and the stage logs in that
    database, so a fleet's machines share no filesystem; the state dir is then each
    machine's working copy (docs/architecture/postgresql.md). Its password is never
    printed or written; better, leave it out and set ``$PGPASSWORD``."""

    url: ConfiguredStorageUrl | None = None


class ModelConfig(Frozen):
    """The one model the recovery loop may ask. The key is read from the environment
    variable named here, never from this file."""

    provider: Literal["anthropic"] = "anthropic"
    name: NonEmptyStr = "claude-sonnet-4-6"
    api_key_env: Annotated[StrictStr, Field(pattern=r"^[A-Z_][A-Z0-9_]{0,63}$")] = (
        "ANTHROPIC_API_KEY"
    )
    timeout_s: PositiveSeconds = 120.0
    max_retries: Annotated[StrictInt, Field(ge=0, le=5)] = 2
    max_tokens: Annotated[StrictInt, Field(ge=256, le=32_000)] = 2048


EngineKind = Literal["patch", "claude-code", "codex", "aider", "command"]


class EngineConfig(Frozen):
    """A coding engine: which adapter runs it (``kind``), its model ladder (weakest
    first) and the adapter's own settings. ``command`` is the argv template of a
    ``command`` engine (shorthand for ``settings.command``)."""

    kind: EngineKind = "command"
    command: Argv | None = None
    models: Annotated[tuple[NonEmptyStr, ...], Field(max_length=16)] = ()
    settings: dict[str, Any] = Field(default_factory=dict)
    # The variables (beyond the base every stage gets) a stage running this engine is
    # given, by name: a stage's environment is an allow-list (stage_env.stage_environ).
    pass_env: PassEnv = ()
    # Hosts it may reach besides its kind's provider (domain/egress.py), every stage it runs.
    egress: EgressEntries = ()

    def adapter_settings(self) -> dict[str, Any]:
        if self.command is not None:
            return {**self.settings, "command": list(self.command)}
        return dict(self.settings)

    @model_validator(mode="after")
    def _settings_fit_the_adapter(self) -> EngineConfig:
        from orchestrator.domain.engine_settings import settings_problems

        if self.command is not None and self.kind != "command":
            raise ValueError(
                f"'command' is only for kind = \"command\" (this engine is {self.kind!r})"
            )
        problems = settings_problems(self.kind, self.adapter_settings())
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _stage_placeholders(command: tuple[str, ...]) -> tuple[str, ...]:
    """A stage's or a check's command, refused at load when it holds a placeholder gone
    wrong (``domain/placeholders.py``) rather than failing in a clone."""
    problems = placeholder_problems(command, "stage")
    if problems:
        raise ValueError("; ".join(problems))
    return command


StageArgv = Annotated[Argv, AfterValidator(_stage_placeholders)]


class CheckConfig(SandboxOptions):
    """One named review check. ``kinds`` limits it to those ticket kinds (empty: all)."""

    name: Name
    command: StageArgv
    timeout_s: PositiveSeconds = 600.0
    kinds: Annotated[tuple[TicketKindName, ...], Field(max_length=32)] = ()
    # Globs (relative to the clone; ``*`` crosses ``/``) a mechanical fix may not change.
    # Unset: the check's own files and, for a check that runs tests, its test directories.
    protected: Annotated[tuple[ProtectedGlob, ...], Field(max_length=64)] | None = None
    # Globs (relative to the clone; ``*`` within one name, ``**`` any number of
    # directories) of the reports the check writes: JUnit XML, SARIF or TAP, told apart by
    # content. When it fails, their failing cases are its first evidence
    # (orchestrator/reading/check_reports/); a report older than the check's start is ignored.
    reports: Annotated[tuple[ReportGlob, ...], Field(max_length=16)] = ()
    # What a check already red on the base commit means (run there before the first
    # engine stage, cached per base commit): "stop" ends the run needs-human (base_red)
    # before any engine or model is paid; "compare" goes on and, after the change, counts
    # only failures the base did not have; "ignore" does not run it on the base at all.
    on_red_base: Literal["stop", "compare", "ignore"] = "stop"


class StageConfig(SandboxOptions):
    """One pipeline stage: exactly one of ``command``, ``engine`` or ``checks``. Its
    sandbox settings are its checks' too, unless a check sets its own."""

    name: Name
    command: StageArgv | None = None
    engine: Name | None = None
    model: NonEmptyStr | None = None
    checks: Annotated[tuple[CheckConfig, ...], Field(max_length=64)] = ()
    # The clone does not exist before the clone stage, so that stage runs in the run dir.
    cwd: Literal["clone", "run"] = "clone"
    timeout_s: PositiveSeconds = 600.0
    kill_after_s: PositiveSeconds = 5.0
    side_effectful: StrictBool = False
    # The variables (beyond the base every stage gets) this stage and its checks are
    # given, by name: a stage's environment is an allow-list (stage_env.stage_environ).
    pass_env: PassEnv = ()
    # For a stage running orchestrator.stages.open_pr_github / open_pr_gitlab: where that
    # forge is (GitHub Enterprise's https://HOST/api/v3, a self-managed GitLab's base URL)
    # for tickets no [[sources]] entry took in (domain/forge_hosts.forge_location, issue 43).
    forge_url: HttpUrl | None = None

    @model_validator(mode="after")
    def _one_kind_of_work(self) -> StageConfig:
        given = [k for k in ("command", "engine", "checks") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(
                "a stage needs exactly one of 'command', 'engine' or 'checks'"
                + (f", not {' and '.join(given)}" if given else "")
            )
        if self.model is not None and self.engine is None:
            raise ValueError("'model' is only meaningful with 'engine'")
        forge_modules = ("orchestrator.stages.open_pr_github", "orchestrator.stages.open_pr_gitlab")
        if self.forge_url is not None and not any(m in (self.command or ()) for m in forge_modules):
            raise ValueError(
                "'forge_url' is only meaningful for a stage that runs "
                "orchestrator.stages.open_pr_github or orchestrator.stages.open_pr_gitlab"
            )

        names = [c.name for c in self.checks]
        if len(names) != len(set(names)):
            raise ValueError("check names must be unique within a stage")
        return self

    @property
    def is_check_stage(self) -> bool:
        return bool(self.checks)


class GitConfig(Frozen):
    """Who a run's commits are by when no git config says so (the user's global or
    system config, or the clone's own, still wins): instead of the orchestrator's
    fallback identity, ``orchestrator <orchestrator@localhost>``."""

    author_name: (
        Annotated[StrictStr, Field(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f<>]+$")]
        | None
    ) = None
    author_email: (
        Annotated[StrictStr, Field(max_length=256, pattern=r"^[^\s<>@]+@[^\s<>@]+$")] | None
    ) = None


class Config(Frozen):
    state_dir: NonEmptyStr = DEFAULT_STATE_DIR
    recovery: RecoveryConfig = RecoveryConfig()
    model: ModelConfig = ModelConfig()
    routing: RoutingConfig = Field(default_factory=lambda: RoutingConfig.model_validate({}))
    judge: JudgeConfig = JudgeConfig()
    diagnosis: DiagnosisConfig = DiagnosisConfig()
    batch: BatchConfig = BatchConfig()
    logs: LogsConfig = LogsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    distributed: DistributedConfig = DistributedConfig()
    storage: StorageConfig = StorageConfig()
    playbook: PlaybookConfig = PlaybookConfig()
    git: GitConfig = GitConfig()
    prices: dict[NonEmptyStr, PriceConfig] = Field(default_factory=dict)
    engines: dict[Name, EngineConfig] = Field(default_factory=dict)
    # ``[[notify]]``: where a run's events go (domain/notify.py).
    notify: Annotated[tuple[NotifyTarget, ...], Field(max_length=16)] = ()
    # ``[[sources]]``: where batch finds tickets (domain/sources.py); none: the directory given.
    sources: Annotated[tuple[Source, ...], Field(max_length=32)] = ()
    stages: Annotated[tuple[StageConfig, ...], Field(min_length=1, max_length=64)]

    @model_validator(mode="after")
    def _references_resolve(self) -> Config:
        names = [s.name for s in self.stages]
        if len(names) != len(set(names)):
            raise ValueError(f"stage names must be unique: {names}")
        source_ids = [source.source_id for source in self.sources]
        if len(source_ids) != len(set(source_ids)):
            raise ValueError(f"sources must differ (give each a 'name'): {source_ids}")
        for stage in self.stages:
            if stage.engine is None:
                continue
            engine = self.engines.get(stage.engine)
            if engine is None:
                raise ValueError(
                    f"stage {stage.name!r} uses engine {stage.engine!r}, which is not "
                    f"defined under [engines] (defined: {sorted(self.engines) or 'none'})"
                )
            if stage.model is not None and engine.models and stage.model not in engine.models:
                raise ValueError(
                    f"stage {stage.name!r} uses model {stage.model!r}, which is not in "
                    f"engine {stage.engine!r}'s ladder {list(engine.models)}"
                )
        return self

    def stage(self, name: str) -> StageConfig:
        return named(self.stages, name)


class LoadedConfig(Frozen):
    """A validated config plus where it came from (placeholders resolve against ``root``)."""

    config: Config
    path: Path
    root: Path
    sha256: str


def parse_config(text: str, path: Path) -> Config:
    """Validate TOML text; raise ConfigError naming ``path`` and the offending key."""
    read = toml_model(text, Config, not_toml="invalid TOML", guess=True)
    if isinstance(read, Config):
        return read
    raise ConfigError(  # what is wrong, one problem a line
        f"config error: {path}: " + "; ".join(read)
        if len(read) == 1
        else f"config error: {path}:\n  " + "\n  ".join(read)
    )


def load_config(path: Path) -> LoadedConfig:
    import hashlib

    path = path.resolve()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"config error: {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config error: {path}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config error: {path}: not UTF-8 text") from None
    return LoadedConfig(
        config=parse_config(text, path),
        path=path,
        root=path.parent,
        sha256=hashlib.sha256(data).hexdigest(),
    )
