"""Shared fixtures. Two guards apply to every test:

* no model credentials reach anything the tests start (a real model call is impossible);
* DRY_RUN starts unset (armed), exactly as a user's shell would have it.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent

# The failure corpus and the offline eval over it (built once per session, on first use);
# a real PostgreSQL server and a fresh database on it (``pg_url``) for any test that asks;
# real Redis servers and worker processes for the fleet's tests.
pytest_plugins = [
    "corpus.fixtures",
    "support.suite_clock",
    "support.postgres_server",
    "support.fleet_fixtures",
]

# Property tests: the full profile in the full tier (`scripts/dev.sh test`, which CI runs)
# and a quick one in the quick tier (`--quick`); a bare `pytest` takes the full one only
# under CI=true. HYPOTHESIS_PROFILE=ci or =dev chooses outright.
# Neither profile times an example: a deadline or the too-slow health check is a clock
# read on a shared machine, which fails a correct test under load (timings go in bench/).
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", print_blob=True, **_UNTIMED)
settings.register_profile("dev", max_examples=20, print_blob=True, **_UNTIMED)
TIER = os.environ.get("ORCHESTRATOR_TEST_TIER") or ("full" if os.environ.get("CI") else "quick")
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if TIER == "full" else "dev")
settings.load_profile(PROFILE)


def examples(full: int, *, least: int = 10) -> int:
    """How many examples a property test draws: ``full`` in the full tier, a fifth (at
    least ``least``) in the quick one, so the edit loop stays quick and CI still searches
    hard. A test whose every example is a whole run can ask for fewer than 10."""
    return full if PROFILE == "ci" else max(least, full // 5)


_SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "GITHUB_TOKEN")


@pytest.fixture(autouse=True)
def _no_model_and_armed_dry_run(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in _SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("DRY_RUN", raising=False)
    monkeypatch.delenv("ORCHESTRATOR_CONFIG", raising=False)
    yield


@pytest.fixture(autouse=True)
def _held_secrets_end_with_the_test() -> Iterator[None]:
    """What a test's in-process CLI held (its ``pass_env`` values) is let go after it.
    Held, a value stays redacted from every later log of the worker process: a fake
    engine's ``FAKE_ENGINE_MODE=rate_limited`` turned a later test's
    ``::failure-class::rate_limited`` line into ``[REDACTED]``, and its class was lost."""
    from orchestrator.redaction.held import holding

    with holding(()):
        yield


@pytest.fixture(autouse=True)
def _no_model_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gateway without an injected (mock) http client cannot be built in a test."""
    # Cheap: the module imports the SDK only when a gateway is built.
    from orchestrator.recovery import anthropic_gateway

    monkeypatch.setattr(anthropic_gateway, "ALLOW_MODEL_REQUESTS", False)
    monkeypatch.setenv("ORCHESTRATOR_ALLOW_MODEL_REQUESTS", "0")


@pytest.fixture
def project_root() -> Path:
    return ROOT


def write_ticket(
    directory: Path,
    ticket_id: str = "T-1",
    *,
    kind: str = "feature",
    repository: str = "../origin.git",
    extra: str = "",
    body: str = "Do the thing.",
) -> Path:
    """A ticket file. Its repository must exist (a ticket pointing at a missing one is
    refused before a run starts): a local path that does not exist yet is made an empty
    bare repository, enough for a pipeline that never clones; a test that clones builds
    its origin first (``harness.make_origin``)."""
    directory.mkdir(parents=True, exist_ok=True)
    if "://" not in repository and not repository.startswith("git@"):
        origin = directory / repository
        if not origin.exists():
            import git  # only tickets without an origin of their own need it

            git.Repo.init(origin, bare=True).close()
    path = directory / f"{ticket_id}.md"
    path.write_text(
        "+++\n"
        f'id = "{ticket_id}"\n'
        f'title = "Ticket {ticket_id}"\n'
        f'kind = "{kind}"\n'
        f'repository = "{repository}"\n'
        'base_branch = "main"\n'
        f"{extra}"
        "+++\n"
        f"{body}\n"
    )
    return path


def write_config(
    directory: Path, stages_toml: str, *, header: str = "", recovery: bool = False
) -> Path:
    """A config whose stages are given as TOML text (state under ``directory/state``).
    Recovery is off unless asked for: these pipelines test stages, not decisions."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "config.toml"
    switch = "" if recovery else "[recovery]\nenabled = false\n"
    path.write_text('state_dir = "state"\n' + header + switch + "\n" + textwrap.dedent(stages_toml))
    return path


# Where test stages count their runs: beside the state dir (which the sandbox hides from
# every stage), in the config's directory; ``{root}`` is expanded in commands and paths.
COUNTS = "{root}/counts"


def bash_stage(name: str, script: str, **options: object) -> str:
    """TOML for a stage running ``bash -c script`` in the run dir. A script that counts
    into ``COUNTS`` may write there (and nowhere else outside its run)."""
    lines = ["[[stages]]", f'name = "{name}"', f"command = {_toml_list(['bash', '-c', script])}"]
    lines.append('cwd = "run"')
    if COUNTS in script and "writable" not in options and options.get("sandbox") != "none":
        options = {**options, "writable": [COUNTS]}
    for key, value in options.items():
        lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n\n"


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return _toml_list(value)
    return _toml_str(str(value))


def _toml_str(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _toml_list(items: list[object]) -> str:
    return "[" + ", ".join(_toml_value(i) for i in items) + "]"


BATCH_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")


def untimed(batch_stdout: str) -> list[str]:
    """A batch's lines without the UTC time each starts with (asserted to be there), and
    without the failed stages' error lines printed under a ticket's line (``    | ``)."""
    lines = [line for line in batch_stdout.splitlines() if not line.startswith("    | ")]
    assert all(BATCH_STAMP.match(line) for line in lines), batch_stdout
    return [BATCH_STAMP.sub("", line) for line in lines]


def orchestrator_cmd(*args: str) -> list[str]:
    """Run the real CLI in a fresh interpreter (as cron would)."""
    return [sys.executable, "-m", "orchestrator", *args]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}
    env["PYTHONPATH"] = str(ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    env["ORCHESTRATOR_ALLOW_MODEL_REQUESTS"] = "0"
    env.update(extra)
    return env
