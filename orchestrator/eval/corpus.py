"""The labelled failure corpus on disk: a directory of cases, each a directory holding
``log.txt`` (the failed stage's or check's log) and ``label.json`` (what the failure is and
what a good decision about it looks like).

Two label formats are read: this project's own (``eval.label.CaseLabel``, which
``corpus.build`` writes) and the ci-logs format of ``../shared/data/ci-logs`` (real CI
logs, read onto a ``CaseLabel`` by ``eval.ci_logs``). A corpus holds one format: its
summary means one thing (the own format carries padded twins as cases of their own; a
ci-logs corpus is padded by ``orchestrator eval --pad``).

Labels are validated when read: a typo in a class or an action names the file and the
key, and nothing else is read past it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from orchestrator.domain.errors import UsageError
from orchestrator.domain.validation import describe_validation_error
from orchestrator.eval import ci_logs
from orchestrator.eval.label import CASE_ID, KNOWN_CLASSES, CaseLabel, Source

__all__ = [
    "CASE_ID",
    "KNOWN_CLASSES",
    "LABEL_FILE",
    "LOG_FILE",
    "Case",
    "CaseLabel",
    "CorpusError",
    "Source",
    "load_corpus",
    "write_case",
]

LABEL_FILE = "label.json"
LOG_FILE = "log.txt"
LabelFormat = Literal["own", "ci-logs"]


class CorpusError(UsageError):
    """The corpus cannot be read as given (missing directory, a bad label)."""


@dataclass(frozen=True)
class Case:
    label: CaseLabel
    log_path: Path


def write_case(corpus_dir: Path, label: CaseLabel, log: bytes) -> Path:
    """Write one case (its directory, log and label); returns its directory."""
    where = corpus_dir / label.id
    where.mkdir(parents=True, exist_ok=True)
    (where / LOG_FILE).write_bytes(log)
    text = json.dumps(label.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"
    (where / LABEL_FILE).write_text(text)
    return where


def _read_label(path: Path) -> tuple[LabelFormat, CaseLabel]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path}: cannot read the label ({exc})") from exc
    if ci_logs.is_ci_logs_label(raw):
        case_id = path.parent.name
        if not CASE_ID.fullmatch(case_id):
            raise CorpusError(f"{path}: the directory name {case_id!r} is not a case id")
        try:
            return "ci-logs", ci_logs.case_label(raw, case_id)
        except ValueError as exc:
            raise CorpusError(f"{path}: {exc}") from exc
    try:
        label = CaseLabel.model_validate(raw)
    except ValidationError as exc:
        raise CorpusError(f"{path}: " + "; ".join(describe_validation_error(exc))) from exc
    if label.id != path.parent.name:
        raise CorpusError(f"{path}: id {label.id!r} is not its directory's name")
    return "own", label


def load_corpus(corpus_dir: Path) -> tuple[Case, ...]:
    """Every case under ``corpus_dir``, sorted by id. Raises CorpusError for a missing
    directory, an empty corpus, a bad label, a case without its log, or a corpus that
    mixes the two label formats."""
    if not corpus_dir.is_dir():
        raise CorpusError(f"no corpus at {corpus_dir} (build one: bash scripts/dev.sh corpus DIR)")
    cases = []
    first_of: dict[LabelFormat, Path] = {}
    for label_path in sorted(corpus_dir.glob(f"*/{LABEL_FILE}")):
        label_format, label = _read_label(label_path)
        first_of.setdefault(label_format, label_path)
        if len(first_of) > 1:
            raise CorpusError(
                f"{corpus_dir}: mixes label formats ({first_of['own']} is this project's, "
                f"{first_of['ci-logs']} is ci-logs'); a corpus holds one"
            )
        log = label_path.parent / LOG_FILE
        if not log.is_file():
            raise CorpusError(f"{label_path.parent}: case {label.id!r} has no {LOG_FILE}")
        cases.append(Case(label, log))
    if not cases:
        raise CorpusError(f"{corpus_dir}: no cases (no */{LABEL_FILE})")
    return tuple(cases)
