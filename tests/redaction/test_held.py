"""Secrets redacted by value (issue 40, item 3): every held value in every form it is
printed in, and nothing that is too short or too common to be one."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from orchestrator.domain.held_secrets import held_values, named_variables, url_credentials
from orchestrator.redaction import REDACTED, HeldSecrets, hold, holding, process_held, redact, scrub
from orchestrator.redaction.held import encodings, worth_holding

R = REDACTED
# No vendor's shape, no telling name, too short for the random-run rule: only its value
# tells it is a secret.
TOKEN = "dpl+9fK2/mQ7xR4~vL8"
HELD = HeldSecrets([TOKEN])
RAW = TOKEN.encode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


FORMS = {
    "as is": TOKEN,
    "reversed": TOKEN[::-1],
    "base64": b64(RAW),
    "base64 unpadded": b64(RAW).rstrip("="),
    "base64 url-safe": base64.urlsafe_b64encode(RAW).decode(),
    "base64 url-safe unpadded": base64.urlsafe_b64encode(RAW).decode().rstrip("="),
    "quote": quote(TOKEN, safe=""),
    "quote keeps /": quote(TOKEN),
    "quote_plus": quote_plus(TOKEN),
    "hex": RAW.hex(),
    "in a JSON string, / escaped": TOKEN.replace("/", "\\/"),
    "HEX": RAW.hex().upper(),
}


def test_the_shape_rules_alone_let_the_token_through() -> None:
    # what this part fixes: without the held value, every form goes through
    for form in FORMS.values():
        assert redact(f"got {form} back", held=HeldSecrets()) == f"got {form} back"


@pytest.mark.parametrize("name", sorted(FORMS))
def test_each_form_is_redacted(name: str) -> None:
    form = FORMS[name]
    assert redact(f"got {form} back", held=HELD) == f"got {R} back"
    assert redact(form, held=HELD) == R
    assert scrub(f"({form})", held=HELD)[0] == f"({R})"


def test_lower_case_escapes() -> None:
    lowered = quote(TOKEN, safe="").replace("%2B", "%2b").replace("%2F", "%2f")
    assert redact(f"q={lowered}", held=HELD) == f"q={R}"


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "a much longer prefix: "])
@pytest.mark.parametrize("after", ["", "!", ":tail", " and more bytes after it"])
def test_inside_a_longer_base64_text_at_every_offset(before: str, after: str) -> None:
    """``user:token`` in a Basic header: the token's bytes are encoded with their
    neighbours' at its edges; the middle is its own at each of the 3 offsets. At most 2
    of its bytes survive at each edge, mixed with a neighbour's."""
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode((before + TOKEN + after).encode()).decode()
        out = redact(f"Authorization: Basic {text}", held=HELD)
        assert R in out, (before, after)
        left, _, right = out.removeprefix("Authorization: Basic ").partition(R)
        # what is left decodes to the neighbours and at most 2 bytes of the token a side
        assert len(left) <= len(encode(before.encode()).rstrip(b"=")) + 3
        assert len(right.rstrip("=")) <= len(encode(after.encode()).rstrip(b"=")) + 4


def test_every_occurrence_and_overlapping_forms() -> None:
    text = f"{TOKEN} {TOKEN[::-1]}{TOKEN} x{RAW.hex()}y {TOKEN}"
    assert redact(text, held=HELD) == f"{R} {R} x{R}y {R}"


def test_a_url_with_the_secret_inside() -> None:
    hook = "https://hooks.example.com/services/T000/B000/Xq8rTzLm"
    held_hook = HeldSecrets([hook])
    said = f"posting to {quote(hook, safe='')} failed; url={hook}"
    assert redact(said, held=held_hook) == f"posting to {R} failed; url={R}"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "short1!",  # under 8 characters
        "production",  # a word in one case
        "PRODUCTION",
        "Production",
        "12345678",  # a number, a date, a version
        "2026-01-01 12:00",
        "1.2.3-4",
        "/usr/lib/jvm/java-17",  # a path: where a secret is, never the secret
        "./relative/thing",
        "~/.ssh/id_ed25519",
        R,
        "[REDACTED",  # a part of the mark would grow it at every pass
    ],
)
def test_short_or_common_values_are_not_held(value: str) -> None:
    assert not worth_holding(value)
    assert not HeldSecrets([value])
    text = f"deploying {value} to production at 12345678 from /usr/lib/jvm/java-17"
    assert redact(text, held=HeldSecrets([value])) == redact(text, held=HeldSecrets())


def test_a_held_value_does_not_blank_its_own_words() -> None:
    """Every form is 8 characters or more: a value's short forms are not matched."""
    assert all(len(form) >= 8 for form in encodings("abcd1234"))
    assert redact("abcd 1234 dcba", held=HeldSecrets(["abcd1234"])) == "abcd 1234 dcba"


def test_idempotent() -> None:
    text = " ".join(FORMS.values()) + " " + b64(f"user:{TOKEN}".encode())
    once = redact(text, held=HELD)
    assert redact(once, held=HELD) == once
    assert TOKEN not in once


def test_non_ascii_text_and_values() -> None:
    secret = "pässwörd-ÅÆØ-2026"
    held_one = HeldSecrets([secret])
    text = f"ünïcödé {secret} — {secret[::-1]} {b64(secret.encode())} \udcff"
    assert redact(text, held=held_one) == f"ünïcödé {R} — {R} {R} \udcff"


MB = 1 << 20


@pytest.mark.slow
@pytest.mark.timeout(20, method="thread")
@pytest.mark.parametrize(
    "text",
    [
        "a" * MB,
        TOKEN[:-1] * (MB // len(TOKEN)),  # a near miss everywhere: every word hits
        (TOKEN + " ") * (MB // 20),  # the secret everywhere
        "74" * (MB // 2),  # hex pairs: the words of every hex form
    ],
    ids=["one-char", "near-misses", "secret-everywhere", "hex-pairs"],
)
def test_linear_time_on_1_mb(text: str) -> None:
    fifty = HeldSecrets([TOKEN, *(f"s3cr3t-{i:02d}-Kq8Lm2Np7Rt4" for i in range(49))])
    started = time.perf_counter()
    out = redact(text, held=fifty)
    assert TOKEN not in out
    assert time.perf_counter() - started < 10


def test_the_process_registry() -> None:
    assert not process_held()  # nothing held outside a command
    with holding([TOKEN]) as now:
        assert now is process_held() and TOKEN in now.values
        assert redact(f"x {TOKEN[::-1]}") == f"x {R}"
        hold(["later-added-Kq8Lm2Np7"])  # a pass_env value read when a stage starts
        assert redact("later-added-Kq8Lm2Np7") == R
        assert redact("later-added-Kq8Lm2Np7", held=HeldSecrets()) == "later-added-Kq8Lm2Np7"
    assert not process_held()
    assert redact(TOKEN) == TOKEN


def test_which_values_are_held() -> None:
    config = {
        "model": {"api_key_env": "MY_MODEL"},
        "sources": [{"kind": "github", "token_env": "FORGE_A"}],
        "notify": [
            {"kind": "slack", "url_env": "HOOK"},
            {"kind": "email", "password_env": "SMTP_PW", "username_env": "SMTP_USER"},
        ],
        "stages": [
            {"name": "review", "pass_env": ["DEPLOY_HOOK"], "checks": [{"pass_env": ["CHK"]}]}
        ],
        "engines": {"e": {"pass_env": ["ENGINE_VAR"]}},
        "distributed": {"broker_url": "redis://:broker-Pw-1234@10.0.0.1:6379/0"},
        "storage": {"url": "postgresql://app:db%2FPw-5678@db/app?sslpassword=ssl-Pw-9012"},
    }
    assert named_variables(config) == {
        "MY_MODEL", "FORGE_A", "HOOK", "SMTP_PW", "DEPLOY_HOOK", "CHK", "ENGINE_VAR"
    }  # fmt: skip
    environ = {
        "MY_MODEL": "m-1", "FORGE_A": "f-1", "HOOK": "https://hooks.example/T1/B2/x",
        "SMTP_PW": "s-1", "SMTP_USER": "mailer", "DEPLOY_HOOK": "d-1", "CHK": "c-1",
        "ENGINE_VAR": "e-1", "ORCHESTRATOR_LEDGER_KEY": "l-1", "PGPASSWORD": "p-1",
        "UNNAMED": "u-1", "PATH": "/bin",
        "ORCHESTRATOR_BROKER_URL": "redis://:env-broker-pw@localhost:6379/0",
        "MY_URL_TOKEN": "https://user:tok-pw-3456@example.com/",
    }  # fmt: skip
    assert held_values(environ, config) == {
        "m-1", "f-1", "https://hooks.example/T1/B2/x", "s-1", "d-1", "c-1", "e-1", "l-1",
        "p-1", "env-broker-pw", "broker-Pw-1234", "db%2FPw-5678", "db/Pw-5678",
        "ssl-Pw-9012", "https://user:tok-pw-3456@example.com/", "tok-pw-3456",
    }  # fmt: skip
    assert held_values({"UNNAMED": "u-1"}) == set()
    assert list(url_credentials("redis://localhost:6379/0")) == []


def test_what_a_command_holds_from_its_environment_and_config(tmp_path: Path) -> None:
    from orchestrator.app.held_secrets import config_table, holding_secrets

    config = tmp_path / "config.toml"
    config.write_text('[[stages]]\nname = "x"\ncommand = ["true"]\npass_env = ["HOOK"]\n')
    environ = {"HOOK": "https://hooks.example/T1/B2/xyz", "PATH": "/usr/bin:/bin"}
    with holding_secrets(config, environ) as now:
        assert now.values == {"https://hooks.example/T1/B2/xyz"}
    assert not process_held()
    config.write_text("not [ toml")
    assert config_table(config) is None  # the command that loads it says why
    with holding_secrets(config, {"GITHUB_TOKEN": "ghs-Kq8Lm2Np7Rt4"}) as now:
        assert now.values == {"ghs-Kq8Lm2Np7Rt4"}
