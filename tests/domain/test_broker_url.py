"""The broker URL: validated in config, overridden by the environment, and its password
never printed, persisted or handed to a stage."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.domain.broker_url import (
    BROKER_URL_ENV,
    BrokerUrl,
    broker_url_from,
    mask_url,
    scrub,
)
from orchestrator.domain.config import load_config, parse_config
from orchestrator.domain.errors import ConfigError

from conftest import (
    bash_stage,
    examples,
    orchestrator_cmd,
    subprocess_env,
    write_config,
    write_ticket,
)

MINIMAL = '[[stages]]\nname = "a"\ncommand = ["true"]\n'
PASSWORD = "hunter2-Secret-pw"


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        (f"redis://:{PASSWORD}@redis.internal:6379/0", "redis://:***@redis.internal:6379/0"),
        (f"redis://fleet:{PASSWORD}@10.0.0.5/3", "redis://fleet:***@10.0.0.5/3"),
        (f"rediss://default:{PASSWORD}@host:6380", "rediss://default:***@host:6380"),
        # Some clients read a lone user-info part as the password: masked whole.
        (f"redis://{PASSWORD}@host:6379/0", "redis://***@host:6379/0"),
        # A raw '/', '?' or '#' in the password breaks URL parsing; still masked.
        ("redis://:pa/ss?wo#rd@host/0", "redis://:***@host/0"),
        ("redis://host:6379/0?password=abc123&db=2", "redis://host:6379/0?password=***&db=2"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        (f":{PASSWORD}@host", ":***@host"),
    ],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


# Slow tier: a full run of examples is what the 10 s guard caught beside a full suite's
# heaviest neighbours (two such tests at 11-12 s there, about a second alone); the edit
# loop draws a fifth of them.
@pytest.mark.slow
@pytest.mark.quick
@settings(max_examples=examples(500))
@given(
    secret=st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=40),
    user=st.sampled_from(["", "fleet", "user.name"]),
    tail=st.sampled_from(["host", "host:6379", "10.0.0.1:6380/2", "[::1]:6379/0", "h/0?db=1"]),
)
def test_no_password_survives_masking(secret: str, user: str, tail: str) -> None:
    password = "Zx9" + secret  # marked, so it cannot be mistaken for the rest of the URL
    url = f"redis://{user}:{password}@{tail}"
    assert password not in mask_url(url)
    assert password not in scrub(f"failed: {url} ({password})", url)


def test_scrub_removes_the_password_from_a_foreign_message_quoting_it() -> None:
    url = f"redis://u:{PASSWORD}@host:6379/0"
    message = f"AUTH u {PASSWORD} failed for {url} (pw%3D{PASSWORD})"
    assert scrub(message, url) == "AUTH u *** failed for redis://u:***@host:6379/0 (pw%3D***)"


def test_every_rendering_of_a_configured_url_is_masked(tmp_path: Path) -> None:
    url = f"redis://:{PASSWORD}@redis.internal:6379/0"
    config = parse_config(MINIMAL + f'[distributed]\nbroker_url = "{url}"\n', tmp_path / "c.toml")
    broker = config.distributed.broker_url
    assert broker is not None
    assert broker.reveal() == url  # for the client that connects, and nothing else
    renderings = [
        str(broker),
        repr(broker),
        f"{broker}",
        repr(config),
        str(config.model_dump()),
        config.model_dump_json(),
        config.distributed.model_dump_json(),
    ]
    for text in renderings:
        assert PASSWORD not in text
    assert str(broker) == "redis://:***@redis.internal:6379/0"
    assert config.distributed.model_dump() == {
        "broker_url": "redis://:***@redis.internal:6379/0",
        "namespace": "orchestrator",
        "visibility_timeout_s": 6 * 3600.0,
        "lease_s": 60.0,
        "outage_wait_s": 300.0,
        "lost_task_check_s": 30.0,
        "fleet_key": "fleet.key",
        "fleet_certificate": "fleet.crt",
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            f'"http://:{PASSWORD}@host/0"',
            "distributed.broker_url: 'http://:***@host/0' is not a redis URL (expected redis://[[user]:password@]host[:port][/db] or rediss://…)",
        ),
        (
            f'"redis://:{PASSWORD}@:6379/0"',
            "distributed.broker_url: 'redis://:***@:6379/0' names no host (expected redis://[[user]:password@]host[:port][/db] or rediss://…)",
        ),
        (
            f'"redis://:{PASSWORD}@host:99999/0"',
            "distributed.broker_url: 'redis://:***@host:99999/0' is not a valid URL: Port out of range 0-65535 (expected redis://[[user]:password@]host[:port][/db] or rediss://…)",
        ),
        (
            f'"redis://:{PASSWORD}@host/cache"',
            "distributed.broker_url: 'redis://:***@host/cache': the path must be a database number, like /0",
        ),
        (
            f'"redis://:{PASSWORD} @host/0"',
            "distributed.broker_url: 'redis://:***@host/0' is empty or contains blanks or control characters (expected redis://[[user]:password@]host[:port][/db] or rediss://…)",
        ),
        ("6379", "distributed.broker_url: expected a redis:// URL as a string, not int"),
        ('"redis://h/0"\nport = 1', "distributed.port: unknown key (not allowed here)"),
        ('"redis://h/0"\nnamespace = "a b"', "distributed.namespace: String should match"),
    ],
)
def test_a_bad_broker_url_names_the_file_and_the_key_but_not_the_password(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(MINIMAL + f"[distributed]\nbroker_url = {value}\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert message.startswith(f"config error: {path}: {expected}"), message
    assert PASSWORD not in message


def test_the_environment_overrides_the_config_and_is_checked_as_strictly(tmp_path: Path) -> None:
    configured = BrokerUrl(f"redis://:{PASSWORD}@config-host:6379/0")
    path = tmp_path / "config.toml"
    assert broker_url_from(configured, {}, path) == configured
    assert broker_url_from(configured, {BROKER_URL_ENV: ""}, path) == configured
    from_env = broker_url_from(
        configured, {BROKER_URL_ENV: f"redis://:{PASSWORD}@env-host/1"}, path
    )
    assert str(from_env) == "redis://:***@env-host/1"
    with pytest.raises(ConfigError) as bad:
        broker_url_from(configured, {BROKER_URL_ENV: f"amqp://:{PASSWORD}@env-host/1"}, path)
    assert str(bad.value) == (
        "config error: $ORCHESTRATOR_BROKER_URL: 'amqp://:***@env-host/1' is not a redis URL "
        "(expected redis://[[user]:password@]host[:port][/db] or rediss://…)"
    )
    with pytest.raises(ConfigError) as missing:
        broker_url_from(None, {}, path)
    assert str(missing.value) == (
        f"config error: {path}: distributed.broker_url: not set (and "
        "$ORCHESTRATOR_BROKER_URL is empty); a distributed batch needs a redis:// URL"
    )


@pytest.mark.slow
def test_the_broker_password_reaches_no_output_no_state_file_and_no_stage(tmp_path: Path) -> None:
    """A real run with the URL in the config and in the environment: the stage prints its
    whole environment into its log, and the password is nowhere afterwards."""
    header = f'[distributed]\nbroker_url = "redis://:{PASSWORD}@config-host:6379/0"\n'
    config = write_config(tmp_path, bash_stage("show-env", "env; echo stage-ran"), header=header)
    ticket = write_ticket(tmp_path / "tickets")
    result = subprocess.run(
        orchestrator_cmd("run", str(ticket), "--config", str(config)),
        capture_output=True,
        text=True,
        env=subprocess_env(**{BROKER_URL_ENV: f"redis://fleet:{PASSWORD}@env-host:6379/0"}),
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    logs = list((tmp_path / "state").rglob("*.log"))
    assert any("stage-ran" in log.read_text() for log in logs), logs
    assert PASSWORD not in result.stdout + result.stderr
    leaked = [
        path
        for path in (tmp_path / "state").rglob("*")
        if path.is_file() and PASSWORD.encode() in path.read_bytes()
    ]
    assert leaked == []
