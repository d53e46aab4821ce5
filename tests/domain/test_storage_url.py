"""``[storage] url`` and ``$ORCHESTRATOR_STORAGE_URL`` (domain/storage_url.py): a
postgresql:// URL that is validated, never shown with its password, and overridden by
the environment; none at all is the files backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.domain.config import parse_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.keys import ORCHESTRATOR_ONLY, STORAGE_URL_ENV
from orchestrator.domain.storage_url import StorageUrl, storage_url_from
from orchestrator.execution.key_shield import is_withheld

STAGES = '[[stages]]\nname = "a"\ncommand = ["true"]\n'
SECRET = "pa55-w0rd-xyz"


def config(storage: str) -> str:
    return f"{storage}\n{STAGES}"


def test_no_storage_is_the_files_backend() -> None:
    parsed = parse_config(STAGES, Path("c.toml"))
    assert parsed.storage.url is None
    assert storage_url_from(parsed.storage.url, {}) is None


def test_a_configured_url_is_kept_and_shown_masked() -> None:
    parsed = parse_config(
        config(f'[storage]\nurl = "postgresql://orch:{SECRET}@db.internal:5433/orch"'),
        Path("c.toml"),
    )
    url = parsed.storage.url
    assert url is not None
    assert url.reveal() == f"postgresql://orch:{SECRET}@db.internal:5433/orch"
    for shown in (str(url), repr(url), parsed.model_dump_json(), str(parsed.model_dump())):
        assert SECRET not in shown
    assert str(url) == "postgresql://orch:***@db.internal:5433/orch"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (f"redis://:{SECRET}@h/0", "is not a postgresql:// URL"),
        (f"postgresql://u:{SECRET}@/db", "names no host"),
        (f"postgresql://u:{SECRET}@h:5432", "names no database"),
        (f"postgresql://u:{SECRET}@h:0/db", "port 0 is not a port"),
        (f"postgresql://u:{SECRET}@h/db name", "blanks or control characters"),
        ("", "is empty"),
    ],
)
def test_a_bad_url_names_the_key_and_never_the_password(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config(f'[storage]\nurl = "{value}"'), Path("/x/c.toml"))
    message = str(caught.value)
    assert message.startswith("config error: /x/c.toml: storage.url")
    assert says in message
    assert SECRET not in message


def test_the_environment_overrides_the_config() -> None:
    configured = StorageUrl("postgresql://a@h1/one")
    from_env = storage_url_from(configured, {STORAGE_URL_ENV: "postgres://b@h2/two"})
    assert from_env == StorageUrl("postgres://b@h2/two")
    assert storage_url_from(configured, {STORAGE_URL_ENV: ""}) == configured
    with pytest.raises(ConfigError) as caught:
        storage_url_from(None, {STORAGE_URL_ENV: f"mysql://u:{SECRET}@h/db"})
    assert f"${STORAGE_URL_ENV}" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_url_variable_is_never_handed_to_a_stage() -> None:
    # With it, a project's test could rewrite run records and approvals in the database.
    assert STORAGE_URL_ENV in ORCHESTRATOR_ONLY
    assert is_withheld(STORAGE_URL_ENV)
