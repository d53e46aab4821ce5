"""``orchestrator playbook list|show|promote|retire`` through the real CLI (issue 44): the
built-in entry listed and marked, a learned entry shown with its provenance, promoted and
retired by a person, a built-in entry retired by writing the project's own file; every
change a ``playbook`` row in the ledger, which ``orchestrator ledger verify`` accepts; a
bad entry file named with its key, an unknown id a usage error naming the directory."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.app.playbook import promote_after_of, propose, store_for
from orchestrator.cli.main import main
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.failure_signature import signature_of
from orchestrator.domain.playbook import EntryStatus, Provenance, parse_entry
from orchestrator.storage.ledger import Ledger

from conftest import subprocess_env, write_config
from support.scripted_cli import run_forked

AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
STAGES = '[[stages]]\nname = "build"\ncommand = ["true"]\n'
BUILT_IN = "commit-order-squash"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "project", STAGES)


def cli(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["playbook", *args, "--config", str(config)])
    got = capsys.readouterr()
    return code, got.out, got.err


def ledger_of(config: Path) -> Ledger:
    return Ledger(config.parent / "state" / "ledger.jsonl")


def learned(config: Path) -> str:
    """A failure's retry that proved right once, proposed (with its ledger row): its id."""
    signature = signature_of(
        "build", "pytest", "code", ["ERROR at setup of test_cards: fixture 'deck' not found"]
    )
    entry = propose(
        store_for(config.parent),
        signature=signature,
        decision={"action": "retry", "summary": "the fixture is made by the build stage"},
        provenance=Provenance(
            run_id="CARDS-1-20261207T110000Z-aaaa",
            ticket_id="CARDS-1",
            verdict=1,
            source="model",
            approved_by="alice",
            outcome="retry green",
            at=AT,
        ),
        description="a missing fixture the build makes",
        ledger=ledger_of(config),
    )
    assert entry is not None and entry.status is EntryStatus.PROPOSED
    return entry.id


def playbook_rows(config: Path) -> list[dict[str, object]]:
    return [r for r in ledger_of(config).rows() if r["kind"] == "playbook"]


def test_list_marks_the_built_in_entry_and_gives_json_fields(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, out, _ = cli(capsys, config, "list")

    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["ID", "STATUS", "AGREE", "WHERE", "CLASS", "ACTION", "DESCRIPTION"]
    assert row.startswith(f"{BUILT_IN} (built-in)  promoted  0")
    assert "*/lint-bug-commit-order  code   mechanical-fix" in row

    code, out, _ = cli(capsys, config, "list", "--json")

    [fields] = [json.loads(line) for line in out.splitlines()]
    assert fields["id"] == BUILT_IN and fields["builtin"] is True and fields["path"] is None
    assert fields["action"] == "mechanical-fix" and fields["agreeing"] == 0


def test_a_learned_entry_is_shown_promoted_and_retired_with_its_ledger_rows(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    entry_id = learned(config)
    code, out, _ = cli(capsys, config, "list", "--status", "proposed")
    assert code == 0
    assert out.splitlines()[1].split()[:6] == [
        entry_id,
        "proposed",
        "1",
        "build/pytest",
        "code",
        "retry",
    ]
    assert BUILT_IN not in out

    code, out, _ = cli(capsys, config, "show", entry_id)

    path = config.parent / "playbook" / f"{entry_id}.toml"
    assert code == 0 and out.startswith(f"# {path}\n" + path.read_text())
    assert (
        "  2026-12-07 12:00:00Z  run CARDS-1-20261207T110000Z-aaaa, ticket CARDS-1, verdict 1: "
        "decided by model, approved by alice; retry green"
    ) in out
    assert f"proposed  (playbook:{entry_id}:proposed:1)" in out

    code, out, _ = cli(capsys, config, "promote", entry_id, "--by", "bob")

    assert code == 0 and f"{entry_id}: promoted by bob;" in out
    entry = parse_entry(path.read_text(), str(path))
    assert entry.status is EntryStatus.PROMOTED and entry.promoted_by == "bob"
    assert cli(capsys, config, "promote", entry_id)[1] == f"{entry_id}: already promoted (by bob)\n"

    code, out, _ = cli(
        capsys, config, "retire", entry_id, "--reason", "the build no longer makes it"
    )

    assert code == 0 and "it decides nothing more" in out
    rows = playbook_rows(config)
    assert [r["decision_id"] for r in rows] == [
        f"playbook:{entry_id}:proposed:1",
        f"playbook:{entry_id}:promoted:2",
        f"playbook:{entry_id}:retired:3",
    ]
    promoted = rows[1]["decision"]
    assert isinstance(promoted, dict)
    assert (promoted["by"], promoted["action"], promoted["verdict"]) == ("bob", "retry", 1)
    assert promoted["approved_by"] == "alice" and rows[1]["source"] == "human"
    assert rows[1]["run"] == "CARDS-1-20261207T110000Z-aaaa"
    assert rows[2]["outcome"] == "retired: the build no longer makes it"

    capsys.readouterr()
    assert main(["ledger", "verify", "--config", str(config)]) == 0
    assert capsys.readouterr().out == "OK: 3 entries\n"
    assert main(["ledger", "show", "--config", str(config)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[3].split()[2:4] == ["playbook", "CARDS-1"]
    assert shown[3].endswith("retired: the build no longer makes it")
    assert "ledger:\n  seq 1" in cli(capsys, config, "show", entry_id)[1]


def test_retiring_a_built_in_entry_writes_the_projects_own_file(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, out, _ = cli(capsys, config, "retire", BUILT_IN, "--reason", "we squash on purpose")

    assert code == 0
    path = config.parent / "playbook" / f"{BUILT_IN}.toml"
    entry = parse_entry(path.read_text(), str(path))
    assert entry.status is EntryStatus.RETIRED and entry.retired_reason == "we squash on purpose"
    code, out, _ = cli(capsys, config, "list", "--json")
    [fields] = [json.loads(line) for line in out.splitlines()]
    assert fields["builtin"] is False and fields["status"] == "retired"
    assert fields["path"] == str(path)
    [row] = playbook_rows(config)
    assert row["decision_id"] == f"playbook:{BUILT_IN}:retired:1"

    code, out, _ = cli(capsys, config, "promote", BUILT_IN, "--by", "carol")

    assert code == 0 and parse_entry(path.read_text(), str(path)).promoted_by == "carol"
    assert len(playbook_rows(config)) == 2


def test_an_unknown_id_names_the_playbook_directory(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    code, _, err = cli(capsys, config, "promote", "no-such-entry")

    assert code == 2
    where = config.parent / "playbook"
    assert err == f"playbook: no entry 'no-such-entry' in {where} (nor built in)\n"
    assert not (config.parent / "state" / "ledger.jsonl").exists()


def test_a_bad_entry_file_is_named_with_its_key(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    entry_id = learned(config)
    bad = config.parent / "playbook" / "broken.toml"
    bad.write_text(
        'id = "broken"\nstatus = "sort-of"\n[match]\ncheck = "x"\npattern = "a"\n'
        '[decision]\naction = "retry"\n'
    )

    code, out, err = cli(capsys, config, "list")

    assert code == 2 and entry_id in out and BUILT_IN in out  # the others are listed
    assert err.startswith(f"playbook: {bad}: status: ")
    code, _, err = cli(capsys, config, "show", "broken")
    assert code == 2 and err.startswith(f"{bad}: status: ")


def test_retire_needs_a_reason(capsys: pytest.CaptureFixture[str], config: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["playbook", "retire", BUILT_IN, "--config", str(config)])

    assert exc.value.code == 2
    assert "--reason" in capsys.readouterr().err
    assert not (config.parent / "playbook").exists()


@pytest.mark.slow
def test_promote_in_a_fresh_interpreter_as_cron_or_a_person_would(config: Path) -> None:
    entry_id = learned(config)

    done = run_forked(  # its own process, forked as `python -m orchestrator` starts
        Path.cwd(), ["playbook", "promote", entry_id, "--config", str(config)],
        subprocess_env(), as_entry=True,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    path = config.parent / "playbook" / f"{entry_id}.toml"
    entry = parse_entry(path.read_text(), str(path))
    assert entry.status is EntryStatus.PROMOTED and entry.promoted_by  # the OS user
    assert [r["decision_id"] for r in playbook_rows(config)][-1] == (
        f"playbook:{entry_id}:promoted:2"
    )


def test_doctor_names_a_bad_entry_file_and_counts_the_entries(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    learned(config)
    capsys.readouterr()
    assert main(["doctor", "--json", "--config", str(config)]) in (0, 2)
    [said] = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "playbook"]
    assert said["status"] == "ok"
    assert said["detail"] == f"{config.parent / 'playbook'}: 1 entries, 0 promoted"

    bad = config.parent / "playbook" / "broken.toml"
    bad.write_text('id = "broken"\n[match]\ncheck = "x"\npattern = "("\n[decision]\naction = "r"\n')
    main(["doctor", "--json", "--config", str(config)])

    [said] = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "playbook"]
    assert said["status"] == "warn"
    assert said["detail"].startswith(f"{bad}: match.pattern: not a regular expression")


def test_show_json_and_no_secret_in_a_row_or_a_file(
    capsys: pytest.CaptureFixture[str], config: Path
) -> None:
    entry_id = learned(config)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"

    code, _, _ = cli(capsys, config, "retire", entry_id, "--reason", f"leaked {token} here")

    assert code == 0
    code, out, _ = cli(capsys, config, "show", entry_id, "--json")
    shown = json.loads(out)
    assert shown["builtin"] is False and shown["entry"]["status"] == "retired"
    assert [r["decision"]["event"] for r in shown["ledger"]] == ["proposed", "retired"]
    assert token not in out
    for path in (config.parent / "playbook").iterdir():
        assert token not in path.read_text()
    assert token not in (config.parent / "state" / "ledger.jsonl").read_text()
    assert "leaked" in shown["entry"]["retired_reason"]


def test_promote_after_is_read_from_the_config_and_a_bad_value_is_named(tmp_path: Path) -> None:
    good = write_config(tmp_path / "a", STAGES, header="[playbook]\npromote_after = 3\n")
    off = write_config(tmp_path / "b", STAGES)
    bad = write_config(tmp_path / "c", STAGES, header="[playbook]\npromote_after = -1\n")

    assert promote_after_of(load_config(good).config) == 3
    assert promote_after_of(load_config(off).config) is None
    with pytest.raises(ConfigError) as exc:
        load_config(bad)
    assert str(exc.value).startswith(f"config error: {bad.resolve()}: playbook.promote_after: ")
