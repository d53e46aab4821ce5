"""Approvals: the only thing besides a Proposal that the substrate accepts.

A proposal routed ``auto`` gets an automatic approval; one routed ``hitl_*`` waits for a
person (``orchestrator approve RUN_ID`` / ``orchestrator reject RUN_ID --reason …``).
Each approval records who (the OS user, or ``auto``) and when, in
``runs/<run-id>.approval-<n>.json``, written once.

An approval is bound to what it approves and to who may approve: it carries the sha256
of the verdict file it answers, as persisted (``verdict_sha256``), and an HMAC-SHA256
over every other field (``hmac``) by the approval key. A stage runs in the clone as this
user and knows its run and attempt, so it can write an approval file where the run will
look; without the key it cannot sign one, and an approval whose verdict file changed
since no longer answers it. ``SignedApprovals`` signs what it writes and refuses, on
reading, anything that does not verify (``ApprovalRefused``).

The key: ``$ORCHESTRATOR_APPROVAL_KEY`` when set, else ``keys/approval.key`` under the
state dir (``StateLayout.approval_key_path``), made on first need with mode 0600. It is
handed in (``ApprovalKeys``), never read from a global; its bytes never reach a repr, a
message or a record. That no stage can read the key file rests on the sandbox hiding the
state dir from the stages it runs: a stage run unsandboxed, as this user, can read it.

Files written before approvals were signed have neither field. They stay readable
(``read_approval``), ``ledger verify`` reports them as unsigned, and no run carries one
out: an unsigned file is exactly what a stage can still write.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac as hmac_lib
import json
import os
import secrets
import stat
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Final, NoReturn, Protocol

from orchestrator.domain import keys
from orchestrator.domain.errors import StateError
from orchestrator.domain.validation import Frozen, read_model
from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.crash_points import CrashPoint, crash_point
from orchestrator.storage.layout import StateLayout

AUTO = "auto"
APPROVAL_KEY_ENV: Final = keys.APPROVAL_KEY_ENV
KEY_BYTES: Final = 32  # a made key's size; one given in the environment needs half that
# What ``ledger verify`` says of a file of the shape earlier versions wrote.
UNSIGNED_BEFORE: Final = "unsigned (written before approvals were signed)"
# Prefixed to what is signed: an HMAC made with this key for anything else never passes.
_DOMAIN: Final = b"orchestrator approval v1\n"


class Approval(Frozen):
    decision_id: str
    run_id: str
    verdict: int
    approved: bool
    by: str  # "auto", the OS user who answered, or a forge account ("github:login")
    at: datetime
    routing: str  # the routing the answer was given for
    reason: str | None = None
    # The issue comment the answer was given in (``app/comment_approvals.py``); absent
    # from an answer given in a shell, and then left out of what is signed, so approvals
    # signed before it existed still verify.
    comment_url: str | None = None
    # Absent from files written before approvals were signed (see the module docstring).
    verdict_sha256: str | None = None  # the verdict file's bytes, as persisted
    hmac: str | None = None  # HMAC-SHA256 of every other field, hex


def os_user() -> str:
    """Who is at the keyboard (or which account cron runs as)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def approval_path(runs_dir: Path, run_id: str, number: int) -> Path:
    """Kept for callers holding a runs dir; ``StateLayout.approval_path`` names the file."""
    return StateLayout(runs_dir.parent).approval_path(run_id, number)


def write_approval(path: Path, approval: Approval) -> None:
    """Write once: an approval, once given, is a record and is not replaced."""
    if path.exists():
        raise StateError(f"state error: {path}: decision {approval.verdict} was already answered")
    atomic_write(path, approval.model_dump_json(indent=2).encode())
    crash_point(CrashPoint.APPROVAL)


def read_approval(path: Path) -> Approval | None:
    """The approval as stored, unverified: for showing it. ``SignedApprovals.read``
    is what a run reads before carrying anything out."""
    return read_model(path, Approval, "approval")


def verdict_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- the key -----------------------------------------------------------------------------


class ApprovalKey:
    """The secret approvals are signed with. Its bytes go into the HMAC and nowhere else:
    no repr, no str, no pickling, so no log line, error or record can carry them."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def __repr__(self) -> str:
        return "ApprovalKey(<hidden>)"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("an approval key is not pickled")

    def mac(self, data: bytes) -> str:
        return hmac_lib.new(self._secret, data, hashlib.sha256).hexdigest()


class ApprovalKeys:
    """Where one command's approval key comes from, built from the environment it was
    handed: ``$ORCHESTRATOR_APPROVAL_KEY`` when set, else the key file at ``path``
    (made on first need when signing; never made when only checking)."""

    __slots__ = ("_given", "_loaded", "path")

    def __init__(self, path: Path, given: ApprovalKey | None = None) -> None:
        self.path = path
        self._given = given
        self._loaded: ApprovalKey | None = None

    @classmethod
    def of(cls, path: Path, environ: Mapping[str, str]) -> ApprovalKeys:
        value = environ.get(APPROVAL_KEY_ENV)
        if value is None:
            return cls(path)
        # Refused rather than falling back to the file: a set-but-empty or short variable
        # is a mistake, and signing with another key than the operator meant would make
        # every approval fail somewhere else, later.
        if len(value.encode("utf-8")) < KEY_BYTES // 2:
            raise StateError(
                f"state error: ${APPROVAL_KEY_ENV} is set but shorter than {KEY_BYTES // 2} "
                "bytes (unset it to use the state dir's key file, or give a longer key)"
            )
        return cls(path, ApprovalKey(value.encode("utf-8")))

    def where(self) -> str:
        """Where the key is (never what it is), for messages."""
        return f"${APPROVAL_KEY_ENV}" if self._given is not None else str(self.path)

    def __repr__(self) -> str:
        return f"ApprovalKeys({self.where()})"

    def for_signing(self) -> ApprovalKey:
        """The key, made (once, by whichever process gets there first) if there is none."""
        key = self.for_checking()
        if key is None:
            _make_key_file(self.path)
            key = self.for_checking()
            assert key is not None  # just made, or made by another process first
        return key

    def for_checking(self) -> ApprovalKey | None:
        """The key, or None when none was ever made (then nothing was signed with it)."""
        if self._given is not None:
            return self._given
        if self._loaded is None:
            self._loaded = _read_key_file(self.path)
        return self._loaded


def _make_key_file(path: Path) -> None:
    """A new random key at ``path``, mode 0600, complete before anyone can open it: written
    to a temp file made with O_EXCL, then hard-linked into place, which fails if another
    process made the key first (theirs stands: every process must sign with one key)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(KEY_BYTES).hex().encode("ascii") + b"\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass
    finally:
        temp.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _read_key_file(path: Path) -> ApprovalKey | None:
    def refused(why: str) -> StateError:
        # Says where and what is wrong, never what the file holds.
        return StateError(f"state error: {path}: approval key {why}")

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise refused(f"cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as source:
        info = os.fstat(source.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise refused("is not a regular file")
        if info.st_mode & 0o077:
            # Anyone else who can read it can approve: not a key any longer.
            raise refused(
                f"is open to other users (mode {stat.S_IMODE(info.st_mode):o}); "
                "chmod 600 it if no one else read it, else remove it (approvals signed "
                "with it then fail to verify)"
            )
        data = source.read(4 * KEY_BYTES)
    try:
        secret = bytes.fromhex(data.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        secret = b""
    if len(secret) < KEY_BYTES:
        raise refused(f"is not a key ({2 * KEY_BYTES} hex digits expected)")
    return ApprovalKey(secret)


# ---- signing and checking (pure) ---------------------------------------------------------


def signed_bytes(approval: Approval) -> bytes:
    """What the HMAC covers: every field but ``hmac``, as canonical JSON (sorted keys, no
    spaces, ASCII), so a file read back and re-serialised signs the same."""
    body = approval.model_dump(mode="json", exclude={"hmac"})
    if body.get("comment_url") is None:
        body.pop("comment_url", None)
    return _DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


def signed(approval: Approval, key: ApprovalKey) -> Approval:
    unsigned = approval.model_copy(update={"hmac": None})
    return approval.model_copy(update={"hmac": key.mac(signed_bytes(unsigned))})


def is_old_unsigned(approval: Approval) -> bool:
    """The shape earlier versions wrote: neither a digest nor an HMAC."""
    return approval.hmac is None and approval.verdict_sha256 is None


def problem(
    approval: Approval,
    *,
    key: ApprovalKey | None,
    run_id: str,
    number: int,
    verdict_sha256: str | None,
) -> str | None:
    """Why ``approval``, found as the answer to ``run_id``'s decision ``number`` whose
    verdict file now hashes to ``verdict_sha256`` (None: there is none), does not answer
    it; None when it does. The HMAC first: nothing an unsigned file says is worth reading."""
    if approval.hmac is None:
        if is_old_unsigned(approval):
            return UNSIGNED_BEFORE
        return "unsigned, though it names a verdict digest (only a version that signs does)"
    if key is None:
        return "signed, but there is no approval key to check it with"
    if not hmac_lib.compare_digest(approval.hmac, key.mac(signed_bytes(approval))):
        return (
            "its HMAC does not match: forged, or signed with another approval key (every "
            f"orchestrator process must see the same ${APPROVAL_KEY_ENV}, or none)"
        )
    if (approval.run_id, approval.verdict) != (run_id, number):
        return (
            f"it answers verdict {approval.verdict} of {approval.run_id}, not verdict "
            f"{number} of {run_id}"
        )
    if verdict_sha256 is None:
        return "there is no verdict file for it to answer"
    if approval.verdict_sha256 != verdict_sha256:
        return (
            f"the verdict file changed after it was approved (sha256 {approval.verdict_sha256} "
            f"when approved, {verdict_sha256} now)"
        )
    return None


class ApprovalRefused(StateError):
    """An approval that does not answer its decision: never carried out."""

    def __init__(self, where: Path, why: str) -> None:
        super().__init__(f"state error: {where}: approval refused: {why}")
        self.where = where
        self.why = why


class ApprovalStore(Protocol):
    """Where approvals are kept, as given (``protocols.Approvals`` is the same shape: it
    is spelled here so that this module needs nothing of the protocols, which reach the
    decision types)."""

    def path(self, run_id: str, number: int) -> Path: ...

    def write(self, approval: Approval) -> None: ...

    def read(self, run_id: str, number: int) -> Approval | None: ...

    def answered(self, run_id: str, number: int) -> bool: ...


class SignedApprovals:
    """The approvals a run writes and acts on: each written signed with the key, each
    read verified against it and against the verdict file's digest. ``store`` is where
    they are kept (the state dir's files, or a fleet worker's fenced ones)."""

    def __init__(self, store: ApprovalStore, keys: ApprovalKeys) -> None:
        self.store = store
        self.keys = keys

    def path(self, run_id: str, number: int) -> Path:
        return self.store.path(run_id, number)

    def answered(self, run_id: str, number: int) -> bool:
        return self.store.answered(run_id, number)

    def write(self, approval: Approval, *, verdict_sha256: str) -> Approval:
        """Bind ``approval`` to the verdict file's bytes, sign it, write it once."""
        bound = approval.model_copy(update={"verdict_sha256": verdict_sha256})
        sealed = signed(bound, self.keys.for_signing())
        self.store.write(sealed)
        return sealed

    def read(self, run_id: str, number: int, *, verdict_sha256: str) -> Approval | None:
        """The answer to decision ``number``, verified; None when there is none yet.
        Raises ApprovalRefused for one that does not verify or does not even read."""
        where = self.path(run_id, number)
        try:
            approval = self.store.read(run_id, number)
        except ApprovalRefused:
            raise
        except StateError as exc:
            said = str(exc).removeprefix(f"state error: {where}: ")
            raise ApprovalRefused(where, f"it does not read as an approval ({said})") from None
        if approval is None:
            return None
        why = problem(
            approval,
            key=self.keys.for_checking(),
            run_id=run_id,
            number=number,
            verdict_sha256=verdict_sha256,
        )
        if why is not None:
            raise ApprovalRefused(where, why)
        return approval
