"""The sandbox settings of config.toml: a stage's or check's (``sandbox``, ``network``,
``writable``, ``readable``) and the limits of ``[sandbox]``. Apart from ``config.py`` so
that what runs a sandbox (``execution/stage_sandbox.py``) depends on these types alone."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from orchestrator.domain.egress import EgressEntries
from orchestrator.domain.validation import Frozen, StrictBool, StrictInt, StrictStr

WritablePath = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
SandboxMode = Literal["bwrap", "none"]


class SandboxOptions(Frozen):
    """Where a stage or check runs. Every one runs under bubblewrap unless it says
    ``sandbox = "none"`` (warned about at start, recorded in the run record); a check
    without its own ``sandbox`` follows its stage. docs/architecture/sandbox.md states the profile:
    read-only root, private /tmp and HOME, the state dir hidden but for this run's clone,
    no network unless ``network`` (unset: none for commands and checks; an engine has
    it, since it calls its model) and then only the hosts of its allow-list, through the
    egress proxy (see ``egress``), no unix sockets, limits from ``[sandbox]``.
    ``writable``: more read-write paths (relative to the clone, or absolute);
    ``readable``: paths the sandbox hides (under the home, /root, /home, /tmp) that this
    one may read. In both, ``~/`` is the home of whoever runs the orchestrator, and
    ``{root}``, ``{clone}``, ``{run_dir}`` are the command placeholders; a missing
    writable path in the clone or the config's directory is made (elsewhere it must
    exist: under the home it may be a file). ``egress``: hosts it may reach besides what
    it is given (``domain/egress.py``: an engine its provider's, a clone its repository's),
    through the egress proxy; ``["*"]`` is the whole network (warned, recorded)."""

    sandbox: SandboxMode | None = None
    network: StrictBool | None = None
    writable: Annotated[tuple[WritablePath, ...], Field(max_length=32)] = ()
    readable: Annotated[tuple[WritablePath, ...], Field(max_length=32)] = ()
    egress: EgressEntries = ()

    @field_validator("sandbox", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        # ``sandbox = true`` was the opt-in before every stage was sandboxed; it still
        # means the sandbox. ``false`` meant "the default", which is now the sandbox, so
        # an opt-out must be written as one: it is never inferred.
        if value is True:
            return "bwrap"
        if value is False:
            raise ValueError(
                "every stage and check is sandboxed now: remove sandbox = false, or write "
                'sandbox = "none" to run this one outside the sandbox'
            )
        return value

    @model_validator(mode="after")
    def _only_when_sandboxed(self) -> SandboxOptions:
        if self.sandbox == "none" and (
            self.network is not None or self.writable or self.readable or self.egress
        ):
            raise ValueError(
                "'network', 'writable', 'readable' and 'egress' are sandbox settings: not "
                'with sandbox = "none"'
            )
        if self.network is False and self.egress:
            raise ValueError("'egress' names hosts to reach: not with network = false")
        return self


class SandboxConfig(Frozen):
    """Limits on every sandboxed command, with everything it starts (0: no limit).
    ``max_memory_mb`` is each process's address space; engines are exempt (JavaScript
    and Java runtimes reserve far more address space than they use)."""

    max_processes: Annotated[StrictInt, Field(ge=0, le=1_000_000)] = 2048
    max_memory_mb: Annotated[StrictInt, Field(ge=0, le=16 * 1024 * 1024)] = 16 * 1024
    max_file_mb: Annotated[StrictInt, Field(ge=0, le=16 * 1024 * 1024)] = 8 * 1024
    # The private /tmp and HOME, held in memory (a tmpfs): counted against the machine's.
    scratch_mb: Annotated[StrictInt, Field(ge=0, le=16 * 1024 * 1024)] = 2 * 1024
    # The orchestrator's own git calls in a clone (status, diff, worktree, reset, clean):
    # in the sandbox too, since git reads the clone's config. "none" opts out.
    git: SandboxMode = "bwrap"


def effective_sandbox(check: SandboxOptions | None, stage: SandboxOptions) -> SandboxOptions:
    """What a check runs under: its own settings over its stage's (paths add up)."""
    if check is None:
        return stage
    return SandboxOptions.model_construct(
        sandbox=check.sandbox or stage.sandbox,
        network=check.network if check.network is not None else stage.network,
        writable=(*stage.writable, *check.writable),
        readable=(*stage.readable, *check.readable),
        egress=(*stage.egress, *check.egress),
    )
