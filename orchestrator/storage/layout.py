"""Every name under the state dir, and the globs that find them: the one module that knows
where things are. Imports nothing heavy (no pydantic), so the fast read-only commands and
the stage programs can use it too.

The layout, path by path, is ``STATE_FILES`` at the end of this module (with the
``StateLayout`` members that build each path; ``docs/reference/state-dir.md`` is generated
from it).

Run records sit beside their verdict, bundle and mechanical-fix files in ``runs/``; only a
name of the run-id shape is a run record.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import NamedTuple

from orchestrator.domain.errors import StateError

# <ticket-id>-<UTC yyyymmddThhmmssZ>-<4 hex>; ticket ids may themselves contain '.' and '-'.
RUN_ID = re.compile(r"^(?P<ticket>[A-Za-z0-9][A-Za-z0-9._-]{0,63})-\d{8}T\d{6}Z-[0-9a-f]{4}$")
RUN_ID_TICKET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_VERDICT_NAME = re.compile(r"^(?P<run>.+)\.verdict-(?P<n>\d+)\.json$")

RUNS_DIR = "runs"
TICKETS_DIR = "tickets"
INTAKE_DIR = "intake"
LOCKS_DIR = "locks"
BATCHES_DIR = "batches"
LEDGER_FILE = "ledger.jsonl"
KEYS_DIR, APPROVAL_KEY_FILE = "keys", "approval.key"
RUN_TICKET_DIR, RUN_CLONE_DIR, RUN_LOGS_DIR = "ticket", "clone", "logs"
# Written by the open-pr stage programs into ``$ORCH_RUN_DIR``, read back by the driver.
PULL_REQUEST_RECORD = "pull-request.json"
PRUNED_RECORD = "pruned.json"
BASELINES_DIR, BASELINE_SUFFIX = "baselines", ".baseline"
BASE_CHECKS_DIR = "base_checks"
NOTIFY_DIR = "notify"
# A commit as git names it (SHA-1 or SHA-256), the only thing a base check's directory is.
_COMMIT = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
# A slug keeps this much of a name to read (its end: a repository's URL or path ends in
# its name), then a hash of the whole name, so two names never share a file.
_SLUG_READABLE = 40
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# A mechanical fix's verification checkout (``runs/<run-id>/verify-<n>/``), normally
# removed after the check; one a crash left behind is pruned with the clone.
_VERIFY_CHECKOUT = re.compile(r"^verify-\d+$")


def is_run_id(name: str) -> bool:
    return RUN_ID.match(name) is not None


def ticket_of(run_id: str) -> str | None:
    """The ticket id inside a run id, or None when ``run_id`` is not of the run-id shape."""
    match = RUN_ID.match(run_id)
    return match.group("ticket") if match else None


def name_slug(name: str) -> str:
    """A file name for an untrusted name (a repository, a check): at most 40 characters of
    it, only letters, digits, ``.``, ``_`` and ``-``, never starting with a dot nor holding
    ``..``, then ``-`` and 12 hex digits of its SHA-256. Pure."""
    readable = re.sub(r"\.{2,}", ".", _SLUG_UNSAFE.sub("-", name))
    readable = readable[-_SLUG_READABLE:].strip(".-")
    import hashlib  # here: every command's start imports this module, few make a slug

    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return f"{readable}-{digest}" if readable else digest


def run_record_paths(runs_dir: Path, ticket_id: str | None = None) -> Iterator[Path]:
    """``runs/<run-id>.json`` files (of one ticket, if given), in name order."""
    wanted = None if ticket_id is None else (ticket_id,)
    for _, name in record_names(runs_dir, wanted):
        yield runs_dir / name


def run_records_by_ticket(
    runs_dir: Path, ticket_ids: Collection[str] | None = None
) -> dict[str, list[Path]]:
    """``runs/<run-id>.json`` files by ticket (of ``ticket_ids`` only, if given), each
    ticket's in name order, from one listing of ``runs/``: what ``run_record_paths``
    gives ticket by ticket, without listing the directory once per ticket (issue 41: a
    report over 1,000 tickets listed its 4,000 entries 1,000 times)."""
    found: dict[str, list[Path]] = {}
    for ticket, name in record_names(runs_dir, ticket_ids):
        found.setdefault(ticket, []).append(runs_dir / name)
    return found


# ``-<yyyymmddThhmmssZ>-<4 hex>.json``: what follows the ticket id in a record's name.
_RECORD_TAIL = len("-20261201T030405Z-0000.json")


def record_names(
    runs_dir: Path, ticket_ids: Collection[str] | None = None
) -> Iterator[tuple[str, str]]:
    """(ticket, file name) of each run record in ``runs/``, in name order, from one
    ``os.listdir`` (a C call; ``Path.glob`` matched each of thousands of names in Python).
    A missing ``runs/`` has none; one that cannot be listed is a StateError."""
    try:
        names = os.listdir(runs_dir)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise StateError(f"state error: {runs_dir}: cannot list: {exc.strerror}") from None
    wanted = None if ticket_ids is None else frozenset(ticket_ids)
    if wanted is not None and len(wanted) == 1:  # one ticket (a driver's): its names only
        [prefix] = wanted
        names = [name for name in names if name.startswith(f"{prefix}-")]
    found = []
    for name in names:
        # (``Z-<4 hex>.json``: a record's end; a verdict's, bundle's... is not)
        if len(name) <= _RECORD_TAIL or name[-11] != "Z" or not name.endswith(".json"):
            continue
        # A record's ticket is its name without the fixed-length tail: a set look-up, and
        # the pattern only for a name of a wanted ticket.
        ticket = name[:-_RECORD_TAIL]
        if wanted is not None and ticket not in wanted:
            continue
        match = RUN_ID.match(name[:-5])
        if match is not None and match.group("ticket") == ticket:
            found.append((name, ticket))
    found.sort()  # only what was found: a ticket's few records, not the whole listing
    for name, ticket in found:
        yield ticket, name


# NamedTuple, not a dataclass: importing dataclasses (and inspect) costs the read-only
# commands ~5 ms of start-up, most of what they spend before doing anything.
class VerdictFile(NamedTuple):
    """One ``runs/<run-id>.verdict-<n>.json`` found on disk."""

    run_id: str
    number: int
    path: Path

    @property
    def ticket_id(self) -> str:
        return ticket_of(self.run_id) or ""


def verdict_files(
    runs_dir: Path, *, run_id: str | None = None, ticket_id: str | None = None
) -> list[VerdictFile]:
    """Verdict files of one run, of one ticket's runs, or of every run: ordered by run id,
    then by decision number (2 before 10). Only names whose run part is a run id count, so
    a stray ``x.verdict-1.json`` is not taken for a decision."""
    if run_id is not None:
        pattern = f"{run_id}.verdict-*.json"
    elif ticket_id is not None:
        pattern = f"{ticket_id}-*.verdict-*.json"
    else:
        pattern = "*.verdict-*.json"
    found = []
    for path in runs_dir.glob(pattern):
        match = _VERDICT_NAME.match(path.name)
        if match is None or not path.is_file():
            continue
        run = match.group("run")
        owner = ticket_of(run)
        if owner is None or (run_id is not None and run != run_id):
            continue
        if ticket_id is not None and owner != ticket_id:
            continue
        found.append(VerdictFile(run, int(match.group("n")), path))
    found.sort(key=lambda v: (v.run_id, v.number))
    return found


class StateLayout(NamedTuple):
    """Where each thing lives under one state dir. Pure: builds paths, touches nothing."""

    root: Path

    @classmethod
    def of_run_dir(cls, run_dir: Path) -> StateLayout:
        """The layout a run's workspace (``runs/<run-id>/``, as a run record holds it)
        belongs to."""
        return cls(run_dir.parent.parent)

    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS_DIR

    def record_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.json"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def ticket_snapshot_dir(self, run_id: str) -> Path:
        """The ticket as the run started from it, with the files it refers to."""
        return self.run_dir(run_id) / RUN_TICKET_DIR

    def clone_dir(self, run_id: str) -> Path:
        return self.run_dir(run_id) / RUN_CLONE_DIR

    def logs_dir(self, run_id: str) -> Path:
        """One log per attempt, check, recipe command and restore."""
        return self.run_dir(run_id) / RUN_LOGS_DIR

    def pruned_record_path(self, run_id: str) -> Path:
        """What retention removed from the run (its clone and logs), and when."""
        return self.run_dir(run_id) / PRUNED_RECORD

    def prunable_paths(self, run_id: str) -> list[Path]:
        """What retention may remove from a finished run: its clone, its logs and any
        verification checkout left behind. Everything a reader needs to see what was
        decided (the record, verdicts, bundles, approvals, replies, hand-off, the ticket
        snapshot) stays."""
        run_dir = self.run_dir(run_id)
        found = [self.clone_dir(run_id), self.logs_dir(run_id)]
        if run_dir.is_dir():
            found += sorted(p for p in run_dir.iterdir() if _VERIFY_CHECKOUT.match(p.name))
        return [p for p in found if p.exists() or p.is_symlink()]

    def pull_request_path(self, run_id: str) -> Path:
        """What a side-effectful stage opened, as its program recorded it."""
        return self.run_dir(run_id) / PULL_REQUEST_RECORD

    def verdict_path(self, run_id: str, number: int) -> Path:
        return self.runs_dir / f"{run_id}.verdict-{number}.json"

    def bundle_path(self, run_id: str, number: int) -> Path:
        return self.runs_dir / f"{run_id}.bundle-{number}.json"

    def replies_dir(self, run_id: str) -> Path:
        """The run's call transcripts' texts, content-addressed (``<sha256>.txt``)."""
        return self.runs_dir / f"{run_id}.replies"

    def approval_path(self, run_id: str, number: int) -> Path:
        return self.runs_dir / f"{run_id}.approval-{number}.json"

    def mechanical_fix_path(self, run_id: str) -> Path:
        """The latest mechanical fix's report: the name older state dirs and scripts know."""
        return self.runs_dir / f"{run_id}.mechanical_fix.json"

    def mechanical_fix_report_path(self, run_id: str, number: int) -> Path:
        """The report of the mechanical fix decision ``number`` decided: one per verdict,
        so a second fix in the same run never overwrites the first's."""
        return self.runs_dir / f"{run_id}.mechanical_fix-{number}.json"

    def handoff_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.handoff.md"

    def run_files(self, run_id: str) -> list[Path]:
        """The files a run left beside its record (verdicts, bundles, approvals, reports,
        the hand-off), in name order: what a reader opens to see what was decided."""
        found = [
            p
            for p in self.runs_dir.glob(f"{run_id}.*")
            if p.is_file() and p.suffix in (".json", ".md") and p != self.record_path(run_id)
        ]
        return sorted(found, key=lambda p: (p.suffix == ".md", p.name))

    def ticket_budget_path(self, ticket_id: str) -> Path:
        return self.root / TICKETS_DIR / f"{ticket_id}.json"

    def ticket_lock_path(self, ticket_id: str) -> Path:
        return self.root / LOCKS_DIR / f"{ticket_id}.lock"

    def batch_dir(self, batch_id: str) -> Path:
        return self.root / BATCHES_DIR / batch_id

    def batch_budget_path(self, batch_id: str) -> Path:
        return self.batch_dir(batch_id) / "budget.json"

    def batch_worker_log(self, batch_id: str, worker: int) -> Path:
        """The output of a ``--jobs N`` batch's worker ``worker`` (1..N)."""
        return self.batch_dir(batch_id) / f"worker-{worker}.log"

    def batch_queue_path(self, batch_id: str) -> Path:
        """The ticket files a ``--jobs N`` batch took in from its ``[[sources]]`` (a JSON
        list of absolute paths): its workers run these rather than read the sources."""
        return self.batch_dir(batch_id) / "queue.json"

    def batch_ticket_dir(self, batch_id: str, ticket_id: str) -> Path:
        """A queued ticket's copy (its file and the files it refers to), for fleet
        workers that share no disk with the batch: the database carries it to them."""
        return self.batch_dir(batch_id) / "tickets" / ticket_id

    def batch_worker_logs(self, batch_id: str) -> list[Path]:
        """Every worker log a ``--jobs N`` batch left, in worker order."""
        found = self.batch_dir(batch_id).glob("worker-*.log")
        return sorted(found, key=lambda p: (len(p.name), p.name))

    def batch_record_path(self, batch_id: str) -> Path:
        """What the batch ran: its tickets, the run each ended in, its model spend."""
        return self.batch_dir(batch_id) / "batch.json"

    def batch_ids(self) -> list[str]:
        """The batches that left a directory, oldest first (their ids start with the
        UTC time they began)."""
        try:
            with os.scandir(self.root / BATCHES_DIR) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except (FileNotFoundError, NotADirectoryError):
            return []

    @property
    def ledger_path(self) -> Path:
        return self.root / LEDGER_FILE

    @property
    def approval_key_path(self) -> Path:
        """The approval key's file, made on first need (``storage/approvals.py``). Outside
        every clone and run workspace, so no stage is handed it; that no stage can read it
        at all rests on the sandbox hiding the state dir from the stages it runs (a stage
        run unsandboxed, as this user, can read any file this user can)."""
        return self.root / KEYS_DIR / APPROVAL_KEY_FILE

    @property
    def baselines_dir(self) -> Path:
        return self.root / BASELINES_DIR

    def baseline_path(self, repo: str, check: str) -> Path:
        """What the green logs of ``check`` in ``repo`` printed (names slugged)."""
        return self.baselines_dir / name_slug(repo) / f"{name_slug(check)}{BASELINE_SUFFIX}"

    def baseline_lock_path(self, repo: str, check: str) -> Path:
        """Held while that baseline is read, merged with a new run and written."""
        return self.baselines_dir / name_slug(repo) / f"{name_slug(check)}.lock"

    def damaged_baseline_path(self, repo: str, check: str) -> Path:
        """Where a baseline that did not read back is moved (the last one only)."""
        path = self.baseline_path(repo, check)
        return path.with_name(f"{path.name}.damaged")

    def baseline_paths(self, *, damaged: bool = False) -> list[Path]:
        """Every baseline file (with ``damaged``, every one moved aside), in name order."""
        suffix = f"{BASELINE_SUFFIX}.damaged" if damaged else BASELINE_SUFFIX
        return sorted(self.baselines_dir.glob(f"*/*{suffix}"))

    @staticmethod
    def lock_path_of_baseline(path: Path) -> Path:
        """The lock of the baseline at ``path`` (or of the one moved aside to ``path``)."""
        return path.with_name(path.name.rpartition(BASELINE_SUFFIX)[0] + ".lock")

    def base_check_path(self, repo: str, commit: str, check: str, digest: str) -> Path:
        """The result of ``check`` (configured as ``digest`` says) on ``commit`` of
        ``repo``; ``.log`` beside it is its log. ValueError for a commit that is not a
        hex object name (it is a directory's name)."""
        if not _COMMIT.match(commit) or not re.fullmatch(r"[0-9a-f]{1,64}", digest):
            raise ValueError(f"not a commit and a digest: {commit!r}, {digest!r}")
        name = f"{name_slug(check)}-{digest}.json"
        return self.root / BASE_CHECKS_DIR / name_slug(repo) / commit / name

    @property
    def notify_dir(self) -> Path:
        return self.root / NOTIFY_DIR

    def notify_record_path(self, run_id: str, event: str, number: int, target: int) -> Path:
        """What notifying target ``target`` of occasion ``number`` of the run's ``event``
        came to (``storage/notify_outbox.py``)."""
        return self.notify_dir / f"{run_id}.{event}-{number}.{target}.json"

    def intake_dir(self, source_id: str) -> Path:
        """The ticket files a ``[[sources]]`` forge source's issues became."""
        if not RUN_ID_TICKET.match(source_id):
            raise ValueError(f"not a source name: {source_id!r}")
        return self.root / INTAKE_DIR / source_id

    def intake_ticket_path(self, source_id: str, ticket_id: str) -> Path:
        if not RUN_ID_TICKET.match(ticket_id):
            raise ValueError(f"not a ticket id: {ticket_id!r}")
        return self.intake_dir(source_id) / f"{ticket_id}.md"

    def write_dirs(self) -> list[Path]:
        """Every directory an atomic write puts files in (so where a killed one leaves
        its temp file): the root, ``runs/``, each run's workspace and replies, ``tickets/``,
        each batch's directory, each repository's baselines and each base commit's
        checks. Not below a workspace: the clone is not ours."""
        found = [self.root, self.runs_dir, self.root / TICKETS_DIR, self.notify_dir]
        for parent in (self.runs_dir, self.root / BATCHES_DIR, self.baselines_dir):
            found += _subdirs(parent)
        found += _subdirs(self.root / INTAKE_DIR)
        for repo in _subdirs(self.root / BASE_CHECKS_DIR):
            found += _subdirs(repo)
        return found


class StateFile(NamedTuple):
    """One row of the state dir's documented layout (``docs/reference/state-dir.md`` is
    generated from ``STATE_FILES``): the path pattern, what is there, and the
    ``StateLayout`` members that build or find it."""

    pattern: str
    meaning: str
    members: tuple[str, ...] = ()


# The state dir's layout for a person reading it (``jq``, a hand-off). A test holds every
# path-building member of ``StateLayout`` to a row here.
STATE_FILES: tuple[StateFile, ...] = (
    StateFile(
        "runs/<run-id>.json",
        "the run record: ticket, state, current stage, every stage's status, every attempt "
        "(command, engine, model, start, end, duration, exit code, `timed_out`, signal, log "
        "path, check results — each with its `failure_class`/`failure_detail` when it failed "
        "for the machine, the network or a missing program — failing check, `failure_class`, "
        "`failure_detail`; for an engine, its turns, tokens and cost, and what the workspace "
        "committed and left out as the engine's own: `committed_paths`, `committed_count`, "
        "`left_out_paths`, `left_out_count`), counters, halt reason, and `resumes` (each "
        "resume: who, when, "
        "from which state and halt, from which stage)",
        ("runs_dir", "record_path"),
    ),
    StateFile(
        "runs/<run-id>/ticket/",
        "the ticket snapshot and the files it refers to",
        ("run_dir", "ticket_snapshot_dir"),
    ),
    StateFile("runs/<run-id>/clone/", "the working clone", ("clone_dir",)),
    StateFile(
        "runs/<run-id>/logs/NNN-<stage>[-<check>].log",
        "one log per attempt (and per check), with the command line and the exit status; "
        "readable by its owner only (0600); capped by `[logs] max_bytes`",
        ("logs_dir",),
    ),
    StateFile(
        "runs/<run-id>/logs/verdict-<n>-{recipe-<i>,verify-checkout,verify-<check>,restore-<i>}.log",
        "decision *n*'s mechanical fix: each recipe command, the verification checkout, the "
        "verifying check, the restore after a red result",
        ("logs_dir",),
    ),
    StateFile(
        "runs/<run-id>/prompt-<n>.txt",
        "the prompt a coding engine was given for attempt *n*",
    ),
    StateFile(
        "runs/<run-id>/aider-<n>/sitecustomize.py",
        "for an `aider` engine's attempt *n*: sets aider's own retry bound from `retries` "
        "(on its `PYTHONPATH`; see the guide's *aider*)",
    ),
    StateFile(
        "runs/<run-id>/pull-request.json",
        "the pull request the open-pr stage recorded",
        ("pull_request_path",),
    ),
    StateFile(
        "runs/<run-id>.verdict-<n>.json",
        "decision *n*, its audit memory: source (`model`, `playbook`, `synthetic`, `infra`), "
        "action, the validated verdict (or, when the proposal was invalid, the "
        "`abandon-human` that replaced it, with the validation errors), reason, halt, model, "
        "prompt version, token usage, the bundle's path; the typed proposal (confidence, "
        "routing, reasoning, evidence by kind); the inputs it was decided from (`inputs`); "
        "and its call `transcript` (per call: purpose, request sha256, reply sha256 and "
        "length, stop reason, error kind, usage, redactions). Written once, before execution",
        ("verdict_path",),
    ),
    StateFile(
        "runs/<run-id>.replies/<sha256>.txt",
        "the reply texts and tool results a transcript references, redacted, stored whole, "
        "named by the sha256 of their UTF-8 bytes; written before the verdict file that "
        "references them",
        ("replies_dir",),
    ),
    StateFile(
        "runs/<run-id>.replies/pending-<n>.json",
        "the replies decision *n* has had so far (request digest and reply), journaled as "
        "each arrives; answers a decision resumed after a kill, and is removed once its "
        "verdict file and ledger rows are written",
        ("replies_dir",),
    ),
    StateFile(
        "runs/<run-id>.bundle-<n>.json",
        "the context bundle decision *n* was made on (capped, redacted)",
        ("bundle_path",),
    ),
    StateFile(
        "runs/<run-id>.mechanical_fix-<n>.json",
        "decision *n*'s mechanical-fix report: the recipe as validated, the sandbox it ran "
        "in (`sandbox`: `bwrap`/`none`), the argv lists, then each command's exit code, the "
        "verifier's result, `head_before`, `uncommitted` (status entries the recipe added), "
        "`protected` (the globs applied), `verified_commit` (the commit the check ran on), "
        "`restored_git_files` (git files put back), `green`/`red` and `red_reason` (written "
        "as the plan, with `head_before`, before it runs, then updated; read back by a "
        "resumed fix, so it is never carried out twice). A key is written once it is known; "
        "the record is `FixReport` (`orchestrator/domain/fix_report.py`), and a report that "
        "is not one is named with its key (`orchestrator report` warns; a fix resumed over "
        "it runs as if it never had)",
        ("mechanical_fix_report_path",),
    ),
    StateFile(
        "runs/<run-id>.mechanical_fix.json",
        "the run's latest mechanical-fix report (older state dirs have only this one)",
        ("mechanical_fix_path",),
    ),
    StateFile(
        "runs/<run-id>/pruned.json",
        "what `orchestrator prune` removed from the run (`removed`: `clone`, `logs`, "
        "`verify-<n>`), how many bytes (`bytes`) and when (`pruned_at`)",
        ("pruned_record_path",),
    ),
    StateFile(
        "runs/<run-id>.handoff.md",
        "for a person: what failed, what was tried, where the evidence is",
        ("handoff_path",),
    ),
    StateFile(
        "runs/<run-id>.approval-<n>.json",
        "the answer to decision *n*: approved or not, by whom (`auto` or the OS user), when, "
        "why; `verdict_sha256` (the verdict file it answers) and `hmac` (by the approval key)",
        ("approval_path",),
    ),
    StateFile(
        "tickets/<ticket-id>.json",
        "every diagnosis and retry charged to the ticket, across runs, and each `reset` of "
        "its caps (who, why, when; charges before it no longer count)",
        ("ticket_budget_path",),
    ),
    StateFile(
        "intake/<source>/<ticket-id>.md",
        "a ticket taken from a forge issue (`[[sources]]`)",
        ("intake_dir", "intake_ticket_path"),
    ),
    StateFile(
        "keys/approval.key",
        "the approval key (0600, made on first need) unless `$ORCHESTRATOR_APPROVAL_KEY` is "
        "set; no stage sees it (the sandbox hides the state dir)",
        ("approval_key_path",),
    ),
    StateFile(
        "ledger.jsonl, ledger.head, ledger.lock",
        "the hash-chained decision ledger, its head (last seq and hash), and the lock appends hold",
        ("ledger_path",),
    ),
    StateFile(
        "ledger.index.sqlite3 (+ -wal, -shm while open)",
        "the ledger's index: rebuilt from the ledger when missing, behind or disagreeing; "
        "safe to delete",
    ),
    StateFile(
        "ledger.quarantine-<time>.jsonl",
        "a torn last line moved aside by `orchestrator ledger repair`",
    ),
    StateFile(
        "locks/<ticket-id>.lock",
        "held (flock) while a process drives the ticket; contains its pid",
        ("ticket_lock_path",),
    ),
    StateFile(
        "notify/<run-id>.<event>-<n>.<target>.json",
        "what notifying `[[notify]]` target `<target>` (its index) of the run's event came "
        "to: `status` (`sent`/`failed`), `tries`, `passes`, `back_off_s`, `error` (the URL "
        "never in it), `at`",
        ("notify_dir", "notify_record_path"),
    ),
    StateFile(
        "baselines/<repo>/<check>.baseline",
        "the templates the check's green logs in that repository printed "
        "(`domain/baseline.py`): a cache, learned from each green check, rebuilt when "
        "damaged; `<repo>` and `<check>` are slugs (readable, then a hash of the name)",
        ("baselines_dir", "baseline_path", "baseline_paths"),
    ),
    StateFile(
        "baselines/<repo>/<check>.lock",
        "flock held while a baseline is merged and written",
        ("baseline_lock_path", "lock_path_of_baseline"),
    ),
    StateFile(
        "baselines/<repo>/<check>.baseline.damaged",
        "a baseline that did not read back, moved aside (the last one only)",
        ("damaged_baseline_path", "baseline_paths"),
    ),
    StateFile(
        "base_checks/<repo>/<commit>/<check>-<digest>.json (+ .log)",
        "a review check's result on a base commit (`passed`, `exit_code`, `timed_out`, the "
        "failure `reading`, `log_path`, `checked_at`) and its log, `<digest>` hashing how "
        "the check is configured: a cache, read instead of running the check on that base "
        "again; safe to delete",
        ("base_check_path",),
    ),
    StateFile(
        "batches/<batch-id>/budget.json",
        "one batch's model spend: calls, tokens, estimated cost",
        ("batch_dir", "batch_budget_path"),
    ),
    StateFile(
        "batches/<batch-id>/batch.json",
        "what one batch did: its id, backend, start and end, each ticket's status, run id, "
        "detail and halt, its model spend as its budget recorded it; written when it starts "
        "and after each ticket (`orchestrator report --batch ID` reads it)",
        ("batch_record_path",),
    ),
    StateFile(
        "batches/<batch-id>/queue.json",
        "the ticket files a `--jobs N` batch took in from its `[[sources]]` (a JSON list of "
        "absolute paths): its workers run these rather than read the sources",
        ("batch_queue_path",),
    ),
    StateFile(
        "batches/<batch-id>/tickets/<ticket-id>/",
        "with `[storage] url` (PostgreSQL), a copy of each ticket a `--backend celery` "
        "batch queued and the files it refers to: the database carries it to the workers, "
        "which share no disk with the batch",
        ("batch_ticket_dir",),
    ),
    StateFile(
        "batches/<batch-id>/worker-<k>.log",
        "a `--jobs N` worker's output (one JSON line per ticket it looked at); 0600, never "
        "capped (it carries the results)",
        ("batch_worker_log", "batch_worker_logs"),
    ),
    StateFile(
        ".<name>.<host>-<pid>.<random>.tmp",
        "a write in progress, or one a kill cut short (wherever atomic writes go); swept "
        "when a run or batch next opens the state dir",
    ),
    StateFile(
        "demo/",
        "the demo's project, origin, tickets, config and its own state dir `demo/state/` "
        "(rebuilt by each demo)",
    ),
)


def _subdirs(parent: Path) -> list[Path]:
    try:
        with os.scandir(parent) as entries:  # the type comes with the entry: no stat
            return sorted(Path(e.path) for e in entries if e.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []
