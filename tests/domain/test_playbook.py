"""Playbook entries as files (issue 44): what ``render_entry`` writes ``parse_entry`` reads
back as the same entry (learned or written, every status), and a file that is not an
entry is refused with its path and the key that is wrong."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from orchestrator.domain.errors import ConfigError
from orchestrator.domain.failure_signature import signature_of
from orchestrator.domain.playbook import (
    MAX_ENTRY_BYTES,
    EntryStatus,
    Match,
    PlaybookEntry,
    Provenance,
    entry_id_for,
    parse_entry,
    render_entry,
)
from orchestrator.starter import builtin_playbook_texts

from conftest import examples

WHERE = "/project/playbook/x.toml"
AT = datetime(2026, 12, 7, 12, 0, 0, 123456, tzinfo=UTC)
PATTERN_ENTRY = (
    'id = "x"\n[match]\ncheck = "lint"\npattern = "^(?P<f>\\\\S+): E501"\n'
    '[decision]\naction = "retry"\n'
)


def learned(status: EntryStatus = EntryStatus.PROPOSED) -> PlaybookEntry:
    signature = signature_of(
        "review", "project-tests", "network",
        ["error: failed to fetch https://index.crates.io/config.json", "Caused by: 503"],
    )  # fmt: skip
    entry = PlaybookEntry(
        id=entry_id_for(signature, "retry"),
        description='a registry outage; "quoted" and\nmultiline',
        match=Match(
            stage=signature.stage,
            check=signature.check,
            failure_class=signature.failure_class,
            signature=signature.lines,
        ),
        decision={"action": "retry", "summary": "the registry answered 503", "wait_s": 30},
        provenance=(
            Provenance(
                run_id="CARDS-1-20261207T110000Z-aaaa",
                ticket_id="CARDS-1",
                verdict=2,
                source="infra",
                approved_by="auto",
                outcome="retry green",
                at=AT,
            ),
        ),
        revision=1,
    )
    if status is EntryStatus.PROMOTED:
        return entry.promoted(by="alice", at=AT)
    if status is EntryStatus.RETIRED:
        return entry.retired(reason="failed verification in run X", at=AT)
    return entry


@pytest.mark.parametrize("status", list(EntryStatus))
def test_a_learned_entry_round_trips(status: EntryStatus) -> None:
    entry = learned(status)

    text = render_entry(entry)

    assert parse_entry(text, WHERE) == entry
    assert text.startswith(f'id = "{entry.id}"\nstatus = "{status.value}"\n')
    assert "[match]" in text and "[decision]" in text and "[[provenance]]" in text


def test_the_built_in_entry_round_trips_and_matches_by_pattern() -> None:
    [(name, text)] = builtin_playbook_texts()
    entry = parse_entry(text, name)

    assert parse_entry(render_entry(entry), name) == entry
    assert entry.status is EntryStatus.PROMOTED and entry.match.pattern is not None
    assert entry.match.signature_key() is None and entry.agreeing == 0


@settings(max_examples=examples(100), deadline=None)
@given(
    description=st.text(max_size=200),
    lines=st.lists(
        st.text(min_size=1, max_size=80).filter(lambda s: s.strip() == s and s), max_size=4
    ),
    summary=st.text(max_size=100),
)
@example(description="a\r\nb", lines=[], summary="\r\n")  # TOML reads a raw CR LF as LF
def test_any_text_round_trips(description: str, lines: list[str], summary: str) -> None:
    match = (
        Match(stage="build", check="lint", signature=tuple(lines))
        if lines
        else Match(check="lint", pattern="x")
    )
    entry = PlaybookEntry(
        id="any", description=description, match=match,
        decision={"action": "abandon-human", "summary": summary},
    )  # fmt: skip

    assert parse_entry(render_entry(entry), WHERE) == entry


def test_each_event_moves_the_revision_and_an_outcome_agrees_once() -> None:
    entry = learned()
    again = entry.agreed(entry.provenance[0])
    other = entry.agreed(entry.provenance[0].revised(run_id="CARDS-2-20261207T120000Z-bbbb"))

    assert again is entry
    assert (other.agreeing, other.revision) == (2, 2)
    assert other.promoted(by="bob", at=AT).revision == 3
    assert other.retired(reason="r", at=AT).promoted(by="bob", at=AT).retired_reason is None


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('colour = "red"\n' + PATTERN_ENTRY, "colour: unknown key (not allowed here)"),
        ('status = "maybe"\n' + PATTERN_ENTRY, "status: Input should be 'proposed', 'promoted'"),
        (PATTERN_ENTRY.replace('id = "x"', 'id = "Not An Id"'), "id: String should match"),
        (PATTERN_ENTRY.replace("E501", "E501("), "match.pattern: not a regular expression"),
        (
            PATTERN_ENTRY.replace('pattern = "', 'signature = ["a"]\npattern = "'),
            "match: give exactly one of `signature` (masked lines) or `pattern`",
        ),
        (
            PATTERN_ENTRY.replace('pattern = "^(?P<f>\\\\S+): E501"\n', ""),
            "match: give exactly one of `signature` (masked lines) or `pattern`",
        ),
        (
            PATTERN_ENTRY.replace('check = "lint"\n', ""),
            "match: a `pattern` reads a check's output: name the `check`",
        ),
        (
            PATTERN_ENTRY.replace('pattern = "^(?P<f>\\\\S+): E501"', 'signature = ["a <n>"]'),
            "match: a `signature` is a stage's failure: name the `stage`",
        ),
        (
            PATTERN_ENTRY.replace('action = "retry"', 'summary = "s"'),
            "decision: a decision names its `action`",
        ),
        ('id = "x"\n[decision]\naction = "retry"\n', "match: required key is missing"),
        (PATTERN_ENTRY + "[[provenance]]\nrun_id = 'r'\n", "provenance[0].source: required key"),
        ("revision = -1\n" + PATTERN_ENTRY, "revision: Input should be greater than or equal"),
        (PATTERN_ENTRY + "=\n", "not valid TOML: "),
        ("#" * (MAX_ENTRY_BYTES + 1), f"larger than {MAX_ENTRY_BYTES} bytes"),
    ],
)
def test_a_bad_entry_is_named_with_its_file_and_key(text: str, said: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_entry(text, WHERE)

    assert str(exc.value).startswith(f"{WHERE}: {said}"), str(exc.value)


def test_a_signature_entrys_key_is_its_failures() -> None:
    entry = learned()
    signature = signature_of(
        "review", "project-tests", "network",
        ["error: failed to fetch https://static.crates.io/config.json", "Caused by: 503"],
    )  # fmt: skip

    assert entry.match.signature_key() == signature.key
    assert entry.id == f"project-tests-retry-{signature.key[:12]}"
