"""The playbook's files (issue 44): a project file takes the place of the built-in entry of
its id; a file that is not an entry is named with its key (raised, or reported and left
out); an entry is parsed again once its file changes; and runs that learn the same
failure at the same time, in separate processes, agree into one entry with one ledger
row per event."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from orchestrator.app.playbook import load_playbook, promote, propose, store_for
from orchestrator.domain.errors import ConfigError
from orchestrator.domain.failure_signature import FailureSignature, signature_of
from orchestrator.domain.playbook import (
    EntryStatus,
    PlaybookEntry,
    Provenance,
    parse_entry,
    render_entry,
)
from orchestrator.domain.proposals import Failure
from orchestrator.storage.ledger import Ledger
from orchestrator.storage.playbook import PlaybookStore, builtin_entries, is_builtin

from conftest import subprocess_env

BUILT_IN = "commit-order-squash"
AT = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_project_file_takes_the_built_in_entrys_place(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    [shipped] = builtin_entries()
    assert store.entries() == (shipped,) and is_builtin(store.entries()[0])

    store.write(shipped.retired(reason="we squash on purpose", at=AT))

    [entry] = store.entries()
    assert entry.status is EntryStatus.RETIRED and not is_builtin(entry)
    assert store.get(BUILT_IN) == entry
    assert len(load_playbook(store, note=lambda _: None)) == 0  # a retired entry decides nothing


def test_a_bad_file_is_named_with_its_key_or_reported_and_left_out(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    store.dir.mkdir()
    bad = store.dir / "broken.toml"
    bad.write_text('id = "broken"\n[match]\ncheck = "x"\npattern = "("\n[decision]\naction = "r"\n')
    (store.dir / "README.md").write_text("not an entry, not read")
    misnamed = store.dir / "other-name.toml"
    misnamed.write_text(render_entry(builtin_entries()[0]))

    with pytest.raises(ConfigError) as exc:
        store.entries()
    assert str(exc.value).startswith(f"{bad}: match.pattern: not a regular expression")

    notes: list[str] = []
    playbook = load_playbook(store, notes.append)

    assert len(playbook) == 1  # the built-in entry, whose id no good file takes
    assert notes[0].startswith(f"playbook: {bad}: match.pattern: not a regular expression")
    assert notes[1] == f"playbook: {misnamed}: id: '{BUILT_IN}' is not the file's name"
    with pytest.raises(ConfigError, match="is not an entry id"):
        store.path("../escape")


def test_an_entry_is_read_again_once_its_file_changes(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    [shipped] = builtin_entries()
    store.write(shipped.retired(reason="first", at=AT))
    first = store.entries()
    assert store.entries()[0] is first[0]  # unchanged: the parsed entry is kept

    path = store.path(BUILT_IN)
    path.write_text(path.read_text().replace('"first"', '"second, by hand"'))  # same inode

    [entry] = store.entries()
    assert entry.retired_reason == "second, by hand"


PROPOSER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path

    from orchestrator.app.playbook import propose, store_for
    from orchestrator.domain.failure_signature import signature_of
    from orchestrator.domain.playbook import Provenance
    from orchestrator.storage.ledger import Ledger

    root, run = Path(sys.argv[1]), sys.argv[2]
    signature = signature_of(
        "build", "project-tests", "network", ["error: failed to fetch https://a.example.com/x"]
    )
    sys.stdin.read()  # every proposer is started before any goes on
    entry = propose(
        store_for(root),
        signature=signature,
        decision={"action": "retry", "summary": run},
        provenance=Provenance(run_id=run, verdict=1, source="infra", approved_by="auto",
                              outcome="retry green", at=datetime.now(UTC)),
        description="a registry outage",
        promote_after=3,
        ledger=Ledger(root / "state" / "ledger.jsonl"),
    )
    print(entry.id if entry else "-")
    """
)


@pytest.mark.slow
def test_concurrent_proposers_agree_into_one_entry(tmp_path: Path) -> None:
    runs = [f"CARDS-{n}-20261207T120000Z-aaaa" for n in range(1, 5)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROPOSER, str(tmp_path), run],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
            text=True,
        )
        for run in runs
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.close()  # go
    said = []
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        said.append((proc.stdout.read(), proc.stderr.read()))
        proc.wait(timeout=60)
        proc.stdout.close()
        proc.stderr.close()

    assert all(proc.returncode == 0 for proc in procs), said
    [entry_id] = {out.strip() for out, _ in said}
    files = sorted(p.name for p in (tmp_path / "playbook").glob("*.toml"))
    assert files == [f"{entry_id}.toml"]
    path = tmp_path / "playbook" / files[0]
    entry = parse_entry(path.read_text(), str(path))
    assert sorted(p.run_id for p in entry.provenance) == runs
    assert entry.status is EntryStatus.PROMOTED
    assert entry.promoted_by == "auto: 3 agreeing outcomes"
    ledger = Ledger(tmp_path / "state" / "ledger.jsonl")
    events = [r["decision"]["event"] for r in ledger.rows()]
    assert events == ["proposed", "agreed", "agreed", "promoted", "agreed"]
    assert ledger.verify().ok
    assert store_for(tmp_path).get(entry_id) == entry


# ------------------------------------------------------------------ the index


def learned(store: PlaybookStore, status: EntryStatus) -> tuple[PlaybookEntry, FailureSignature]:
    signature = signature_of("build", "project-tests", "code", ["E   NameError: name 'deck'"])
    entry = propose(
        store,
        signature=signature,
        decision={"action": "retry", "summary": "flaky"},
        provenance=Provenance(
            run_id="CARDS-1-20261207T120000Z-aaaa", source="model", outcome="green", at=AT
        ),
        description="d",
    )
    assert entry is not None
    if status is EntryStatus.PROMOTED:
        entry = promote(store, entry.id, by="alice", at=AT)
    return entry, signature


def settle(store: PlaybookStore) -> None:
    """The index made, and the directory as if it last changed a minute ago (the index
    trusts only a directory that has not changed in the last two seconds)."""
    store.index(on_error=print)
    st = os.stat(store.dir)
    os.utime(store.dir, ns=(st.st_atime_ns, st.st_mtime_ns - 60 * 10**9))


def edit_in_place(path: Path, old: str, new: str) -> None:
    """As an editor that writes into the file does: the same inode, the directory
    untouched."""
    text = path.read_text().replace(old, new)
    with path.open("r+") as f:
        f.write(text)
        f.truncate()


FAILURE = Failure(check="project-tests", output="", ticket_title="t")


def test_an_index_that_is_stale_never_makes_an_entry_decide(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    entry, signature = learned(store, EntryStatus.PROMOTED)
    settle(store)
    assert load_playbook(store, print).match(FAILURE, signature) is not None
    index = json.loads((store.dir / ".index.json").read_text())
    assert index["files"][f"{entry.id}.toml"][4] == "promoted"

    edit_in_place(store.path(entry.id), 'status = "promoted"', 'status = "retired"')

    assert load_playbook(store, print).match(FAILURE, signature) is None  # read from the file


def test_a_file_promoted_in_place_is_seen_at_the_next_rescan(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    entry, signature = learned(store, EntryStatus.PROPOSED)
    settle(store)
    assert load_playbook(store, print).match(FAILURE, signature) is None

    edit_in_place(store.path(entry.id), 'status = "proposed"', 'status = "promoted"')

    assert load_playbook(store, print).match(FAILURE, signature) is None  # hidden, not wrong
    store.index(on_error=print, rescan=True)  # as `orchestrator playbook list` does
    found = load_playbook(store, print).match(FAILURE, signature)
    assert found is not None and found.entry == entry.id


def test_a_new_file_is_seen_and_a_torn_index_is_rebuilt(tmp_path: Path) -> None:
    store = PlaybookStore(tmp_path)
    store.dir.mkdir()
    settle(store)
    assert load_playbook(store, print).match(FAILURE, None) is None
    entry, signature = learned(store, EntryStatus.PROMOTED)  # a new file: the directory moves

    assert load_playbook(store, print).match(FAILURE, signature) is not None
    (store.dir / ".index.json").write_text('{"version": 3, "dir": [1, 2], "files": {"a')
    notes: list[str] = []
    found = load_playbook(store, notes.append).match(FAILURE, signature)
    assert found is not None and found.entry == entry.id and notes == []
    assert json.loads((store.dir / ".index.json").read_text())["version"] == 3


def test_the_lock_and_the_index_are_ignored_by_git_and_the_entries_are_not(
    tmp_path: Path,
) -> None:
    """The entries are the team's to review and commit; the lock and the index are this
    machine's. A real ``git status`` of the project after a proposal shows the entry and
    the .gitignore, never the lock or the index."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    store = store_for(tmp_path)
    signature = signature_of(
        "review", "lint", "code", ["app.py:3:1: F401 'os' imported but unused"]
    )
    entry = propose(
        store,
        signature=signature,
        decision={"action": "retry", "summary": "flaky"},
        provenance=Provenance(run_id="r-1", source="model", outcome="review passed", at=AT),
        description="a lint failure a retry fixed",
    )
    assert entry is not None
    load_playbook(store, note=lambda _said: None)  # writes the index
    assert (store.dir / ".index.json").exists() and (store.dir / ".playbook.lock").exists()
    shown = subprocess.run(
        ["git", "-C", str(tmp_path), "status", "--porcelain", "--untracked-files=all"],
        check=True, capture_output=True, text=True,
    ).stdout.split("\n")  # fmt: skip
    assert sorted(line for line in shown if line) == sorted(
        ["?? playbook/.gitignore", f"?? playbook/{entry.id}.toml"]
    )
