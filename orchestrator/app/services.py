"""The composition root: what a ticket run is handed, built in one place.

``Services`` holds everything a run touches — the config, the state dir's stores, the
reporter and the hand-off's text (handed in from above), the clock, where processes
start, the model (built only when one must be asked). The CLI, the batch workers, the
fleet's Celery worker and the demo all build it with ``build_services``; tests through one
fixture. The layers below take narrow protocols of it (``attempts.StageServices``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from orchestrator.app.held_secrets import hold_secrets
from orchestrator.app.notify import NoNotifier, Notifier, notifier_for
from orchestrator.app.status_comments import NoStatus, RunStatus, status_for
from orchestrator.domain.config import LoadedConfig, ModelConfig
from orchestrator.domain.git_identity import identity_environ
from orchestrator.domain.lifecycle import HaltReason
from orchestrator.domain.runs import utcnow
from orchestrator.execution.attempts import GreenRecorder
from orchestrator.execution.executor import Executor, LocalExecutor
from orchestrator.execution.reporter import Handoffs, Reporter
from orchestrator.execution.sandbox import BwrapLocator, bundled_bwrap
from orchestrator.execution.stoppable_sleep import stoppable_sleep
from orchestrator.recovery.gateway import GatewayFactory, ModelGateway, Unavailable
from orchestrator.storage import open_configured, resolve_state_dir
from orchestrator.storage.baselines import BaselineStore
from orchestrator.storage.notify_outbox import NotifyOutbox

if TYPE_CHECKING:
    from orchestrator.storage import Storage


def no_gateway() -> ModelGateway | Unavailable | None:
    return None


@dataclass(frozen=True)
class Services:
    """Everything a ticket run touches, passed in (tests swap the reporter, the clock and
    the gateway). ``gateway_factory`` is called only when a model must be asked."""

    loaded: LoadedConfig
    # Every store of the state dir: the files backend locally, a fleet worker's fenced
    # ones (and its claim as the ticket's lock) in the distributed mode.
    storage: Storage
    reporter: Reporter
    handoffs: Handoffs
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Callable[[], datetime] = utcnow
    executor: Executor = field(default_factory=LocalExecutor)  # every process starts here
    gateway_factory: GatewayFactory = no_gateway
    tick_s: float = 1.0
    # The driver's wait before an infra retry: SIGTERM during a back-off stops the run at
    # once, wherever the signal lands (``stoppable_sleep``; time.sleep can miss it).
    sleep: Callable[[float], None] = stoppable_sleep
    # Where the sandbox's bwrap is (a test points it at a missing file to see it refused).
    locate_bwrap: BwrapLocator = bundled_bwrap
    # Where the log of each check that passes is learned from (a baseline of green runs);
    # None: nowhere. Never on the critical path's failures: see ``_learn_from_green``.
    record_green: GreenRecorder | None = None
    # Who is told when a run ends or waits for a person (``[[notify]]``); by default no one.
    notifier: Notifier = field(default_factory=NoNotifier)
    # The status comment on the issue a ticket came from (``[[sources]]``); by default none.
    status: RunStatus = field(default_factory=NoStatus)


# Per process, by the key's digest: what the API said of a key (None: accepted). A
# key does not change under a running process, so it is asked about once.
_KEY_REFUSALS: dict[str, str | None] = {}


def model_gateway_factory(
    model: ModelConfig, environ: Mapping[str, str]
) -> Callable[[], ModelGateway | Unavailable | None]:
    """Build the configured gateway only when a model must actually be asked, and only
    with a key the API accepts: a missing key names its variable, and a refused one
    (401/403, asked once per process by a request that costs no tokens) ends the
    decision ``auth_error`` before a diagnosis is charged. A batch's latch
    (``refused_key.py``) then stops asking for the rest of the batch."""

    def build() -> ModelGateway | Unavailable | None:
        from orchestrator.recovery.anthropic_gateway import gateway_from_config

        key = environ.get(model.api_key_env, "")
        if not key:
            return Unavailable(
                f"no model key: ${model.api_key_env} is not set", halt=HaltReason.NO_MODEL
            )
        gateway = gateway_from_config(model, environ)
        if gateway is None:
            return None
        digest = hashlib.sha256(key.encode()).hexdigest()
        if digest not in _KEY_REFUSALS:
            _KEY_REFUSALS[digest] = gateway.key_refusal()
        refused = _KEY_REFUSALS[digest]
        if refused is not None:
            return Unavailable(
                f"the model refused its key (${model.api_key_env}): {refused}",
                halt=HaltReason.AUTH_ERROR,
            )
        return gateway

    return build


def build_services(
    loaded: LoadedConfig,
    state_dir_override: str | None,
    environ: Mapping[str, str],
    *,
    reporter: Reporter,
    handoffs: Handoffs,
) -> Services:
    """The real services: the runner, the configured model, ``reporter``. The secrets
    ``environ`` and the config hold are held from now on (``held_secrets.py``): the
    fleet's worker builds its services per ticket from the environment it was handed."""
    hold_secrets(loaded.path, environ)
    state_dir = resolve_state_dir(loaded.root, loaded.config.state_dir, state_dir_override)
    storage = open_configured(loaded, state_dir, environ)
    storage.sweep_stale_temps()  # what killed writes left behind
    git = loaded.config.git
    return Services(
        loaded=loaded,
        storage=storage,
        reporter=reporter,
        handoffs=handoffs,
        # The config's [git] author reaches the clone stage (domain/git_identity.py).
        environ={**environ, **identity_environ(git.author_name, git.author_email)},
        gateway_factory=model_gateway_factory(loaded.config.model, environ),
        record_green=BaselineStore(state_dir).record_green,
        notifier=notifier_for(
            loaded.config.notify,
            NotifyOutbox(state_dir),
            environ,
            reporter.note,
            storage.locks.ticket,
        ),
        status=status_for(loaded.config.sources, environ, loaded.config.recovery.forge_max_wait_s),
    )
