"""Ticket files: Markdown with a TOML front-matter block between two ``+++`` lines.

    +++
    id = "CARDS-1"
    title = "deal() hands out one card too few"
    kind = "bug-fix"
    repository = "../origin.git"      # URL, or a path relative to this file
    base_branch = "main"

    [extras.patch]                    # engine-specific, namespaced by engine name
    file = "cards-1.patch"            # relative to this file
    +++
    The body: free Markdown, given to the engine as the task.

Parsing is pure (``parse_ticket``), and so is writing (``render_ticket``, which
``parse_ticket`` reads back unchanged); reading files is ``load_ticket``. A malformed ticket
is refused with the file, the field and the reason, before anything is written.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import tomli_w
from pydantic import Field, ValidationError

from orchestrator.domain.errors import TicketError
from orchestrator.domain.validation import (
    Frozen,
    Name,
    NonEmptyStr,
    StrictStr,
    describe_validation_error,
    toml_model,
)

FENCE = "+++"
MAX_TICKET_BYTES = 1_000_000


class TicketKind(StrEnum):
    BUG_FIX = "bug-fix"
    FEATURE = "feature"
    REFACTOR = "refactor"
    CHORE = "chore"
    DOCS = "docs"
    TEST = "test"


class PatchExtras(Frozen):
    """``[extras.patch]``: the change the offline ``patch`` engine applies."""

    file: NonEmptyStr


# Extras whose shape we know are validated when the ticket is read; others pass through
# for engines that bring their own schema.
KNOWN_EXTRAS: dict[str, type[Frozen]] = {"patch": PatchExtras}


class TicketOrigin(Frozen):
    """``[origin]``: the forge issue a ticket was taken from (``domain/intake.py``); its
    body is then that issue's text, fenced as untrusted."""

    source: Name
    kind: Literal["github", "gitlab"]
    project: Annotated[StrictStr, Field(min_length=1, max_length=500)]
    number: Annotated[int, Field(strict=True, ge=1)]
    url: Annotated[StrictStr, Field(max_length=500)] = ""
    # The forge's API (GitHub's ``api_url``, GitLab's ``base_url``) the issue was read
    # from: the open-pr stage opens the pull request there (``stages/open_pr.py``).
    api_url: Annotated[
        StrictStr, Field(max_length=500, pattern=r"^(https?://[^\s@/]+(/[^\s@]*)?)?$")
    ] = ""


class TicketFields(Frozen):
    id: Name
    title: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    kind: TicketKind
    repository: NonEmptyStr
    base_branch: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")] = (
        "main"
    )
    parent: Name | None = None
    extras: dict[Name, dict[str, Any]] = Field(default_factory=dict)
    origin: TicketOrigin | None = None


class Ticket(Frozen):
    fields: TicketFields
    body: Annotated[StrictStr, Field(min_length=1)]
    path: Path
    sha256: str

    @property
    def id(self) -> str:
        return self.fields.id

    def repository_location(self) -> str:
        """A URL as written; a path made absolute against the ticket's directory."""
        repo = self.fields.repository
        if "://" in repo or repo.startswith("git@"):
            return repo
        return str((self.path.parent / repo).resolve())

    def repository_problem(self) -> str | None:
        """Why the ticket's repository cannot be cloned, when that can be told without
        asking anyone: a local path (or ``file://`` URL) that is missing or is not a git
        repository. None otherwise. A remote URL is not checked: only the network can
        tell, it needs credentials that only the clone stage is given, and an outage must
        stay a retried infrastructure failure rather than a refused ticket; the clone
        stage's own error reaches the console when it fails."""
        location = self.repository_location()
        if location.startswith("file://"):
            location = location.removeprefix("file://")
        elif "://" in location or location.startswith("git@"):
            return remote_repository_problem(location)
        return local_repository_problem(Path(location))

    def refused_repository(self) -> TicketError | None:
        """``repository_problem`` as the error that refuses the ticket before a run is made."""
        problem = self.repository_problem()
        if problem is None:
            return None
        return TicketError(f"ticket error: {self.path}: repository: {problem}; nothing was run")

    def extra_files(self) -> list[Path]:
        """Files the ticket refers to through ``extras.*.file``, resolved."""
        out = []
        for table in self.fields.extras.values():
            ref = table.get("file")
            if isinstance(ref, str):
                out.append((self.path.parent / ref).resolve())
        return out


def remote_repository_problem(url: str) -> str | None:
    """Why a remote ``url`` may not be cloned from: it holds a password (issue 40), which
    would sit in git's command line, readable by every user of the machine, and in the
    clone stage's environment. None otherwise (only the network tells the rest)."""
    from urllib.parse import urlsplit

    from orchestrator.domain.broker_url import mask_url

    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    if not password:
        return None
    return (
        f"{mask_url(url)} holds a password, which git would show on its command line to "
        "every user of this machine; leave it out and let git's credential helper or ssh "
        "give it (open-pr hands the forge's token to git that way)"
    )


def local_repository_problem(path: Path) -> str | None:
    """Why ``path`` is not a git repository a clone can start from, or None. Read from
    the file system only (no git process): a work tree has ``.git`` (a directory, or a
    file for a linked work tree); a bare repository has ``HEAD``, ``objects/`` and
    ``refs/``."""
    try:
        if not path.exists():
            return f"no such directory: {path}"
        if not path.is_dir():
            return f"not a directory: {path}"
        if (path / ".git").exists():
            return None
        if (path / "HEAD").is_file() and (path / "objects").is_dir() and (path / "refs").is_dir():
            return None
    except OSError as exc:
        return f"cannot look at {path}: {exc.strerror}"
    return f"not a git repository: {path}"


def id_taken_elsewhere(ticket: Ticket, recorded_path: str) -> TicketError | None:
    """A ticket file whose id another file still claims: the file an earlier run of
    that id started from (``recorded_path``) exists and holds the same id. Two files
    with one id are a mistake a person must settle; running either would resume or
    repeat the other's run. A file that moved (the old one is gone or now has
    another id) is not a clash."""
    other = Path(recorded_path)
    if other == ticket.path:
        return None
    try:
        claimed = load_ticket(other).id
    except TicketError:
        return None
    if claimed != ticket.id:
        return None
    return TicketError(
        f"ticket error: {ticket.path}: id {ticket.id!r} is taken by another file, {other} "
        "(its runs are this id's runs); rename or remove one of them"
    )


def split_front_matter(text: str) -> tuple[str, str]:
    """Return (toml, body). Raises ValueError with a user-facing reason."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FENCE:
        raise ValueError(f"missing TOML front matter: the first line must be '{FENCE}'")
    for i in range(1, len(lines)):
        if lines[i].strip() == FENCE:
            return "".join(lines[1:i]), "".join(lines[i + 1 :]).strip("\n")
    raise ValueError(f"unterminated front matter: no closing '{FENCE}' line")


def render_ticket(fields: TicketFields, body: str) -> str:
    """A ticket file's text: the fields as TOML front matter (a real TOML writer, so any
    title — quotes, newlines, emoji — reads back as written), then the body."""
    if not body.strip():
        raise ValueError("a ticket needs a body")
    data = fields.model_dump(mode="json", exclude_none=True)
    if not data.get("extras"):
        data.pop("extras", None)
    front = tomli_w.dumps(data)
    # TOML lets these stand raw in a string, but the front matter is split into lines
    # with str.splitlines, which breaks at each: a title holding one (and a "+++") would
    # end the front matter early. Written as TOML escapes, they read back the same.
    for char in _LINE_BREAKS_TOML_KEEPS:
        front = front.replace(char, f"\\u{ord(char):04x}")
    return f"{FENCE}\n{front}{FENCE}\n{body.strip(chr(10))}\n"


# tomli_w emits these unescaped: they are not TOML control characters. (tomli_w writes
# only basic strings, where a \uXXXX escape is valid.)
_LINE_BREAKS_TOML_KEEPS = ("\x85", "\u2028", "\u2029")


def parse_ticket(text: str, path: Path, sha256: str = "") -> Ticket:
    """Validate a ticket's text. ``path`` is used in messages and to resolve relative files."""

    def refuse(reason: str) -> TicketError:
        return TicketError(f"ticket error: {path}: {reason}")

    try:
        front, body = split_front_matter(text)
    except ValueError as exc:
        raise refuse(str(exc)) from None
    fields = toml_model(front, TicketFields, not_toml="invalid TOML in front matter")
    if isinstance(fields, list):
        raise refuse("; ".join(fields))
    for engine, schema in KNOWN_EXTRAS.items():
        if engine in fields.extras:
            try:
                schema.model_validate(fields.extras[engine])
            except ValidationError as exc:
                problems = describe_validation_error(exc)
                raise refuse("; ".join(f"extras.{engine}.{p}" for p in problems)) from None
    if not body.strip():
        raise refuse("body: the ticket has no text after the front matter")
    ticket = Ticket(fields=fields, body=body, path=path, sha256=sha256)
    for engine, table in fields.extras.items():
        ref = table.get("file")
        if not isinstance(ref, str):
            continue
        target = (path.parent / ref).resolve()
        if not target.is_relative_to(path.parent.resolve()):
            raise refuse(f"extras.{engine}.file: {ref!r} points outside the ticket's directory")
        if not target.is_file():
            raise refuse(f"extras.{engine}.file: no such file: {target}")
    return ticket


def load_ticket(path: Path) -> Ticket:
    path = path.resolve()
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise TicketError(f"ticket error: {path}: no such file") from None
    except IsADirectoryError:
        raise TicketError(f"ticket error: {path}: is a directory, not a ticket file") from None
    except OSError as exc:
        raise TicketError(f"ticket error: {path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_TICKET_BYTES:
        raise TicketError(f"ticket error: {path}: larger than {MAX_TICKET_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TicketError(f"ticket error: {path}: not UTF-8 text ({exc.reason})") from None
    return parse_ticket(text, path, hashlib.sha256(data).hexdigest())
