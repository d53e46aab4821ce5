"""A failing check judged against the same check's failure on the base commit
(``on_red_base = "compare"``): only failures the base did not have count.

The failing lines of a log are the lines the failure reading ranks (``reading.scan``'s
hits worth anything to ``ranking.score``); one is new when its template
(``domain.line_templates``) is not among the templates of the lines the base's failing log
printed (read as ``domain.baseline.learn`` reads a green log). A pytest run whose
``test_a`` failed on the base and now fails again prints nothing new; one whose
``test_b`` fails too prints ``FAILED tests/x.py::test_b``, a template the base never did.

``judge`` is pure; ``failing_lines`` and ``base_templates`` read the logs they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

from orchestrator.domain.baseline import Baseline, learn
from orchestrator.reading import ranking
from orchestrator.reading.scan import scan_hits
from orchestrator.reading.signatures import WORDS

__all__ = ["FailingLine", "Judgment", "base_templates", "failing_lines", "judge"]

# New failing lines a judgment keeps, to say what is new (the count is all that decides).
MAX_NEW_SHOWN: Final = 5


class FailingLine(NamedTuple):
    """A line the failure reading ranks: its template, and its text as a reader sees it."""

    template: bytes
    text: bytes


@dataclass(frozen=True)
class Judgment:
    """What the change added to the base's failure: the new failing lines (a few shown,
    all counted), or why it cannot be judged against the base at all."""

    new: tuple[bytes, ...] = ()
    new_count: int = 0
    unjudged: str | None = None

    @property
    def already_on_base(self) -> bool:
        return self.unjudged is None and self.new_count == 0

    def describe(self) -> str:
        if self.unjudged is not None:
            return self.unjudged
        if self.already_on_base:
            return "failures already on the base"
        shown = "; ".join(line.decode("utf-8", "replace") for line in self.new)
        return f"{self.new_count} failing line(s) the base did not print: {shown}"


def judge(
    failing: Sequence[FailingLine],
    on_base: Callable[[bytes], bool],
    *,
    exit_code: int | None,
    timed_out: bool,
    base_exit_code: int | None,
) -> Judgment:
    """Judge a failed check against its failure on the base: ``on_base`` says whether the
    base's failing log printed a template. A timeout, or a log with no failing line to
    compare while the exit code differs from the base's, is not judged (it counts as a
    failure). Pure."""
    if timed_out:
        return Judgment(unjudged="it timed out: a timeout is never the base's failure")
    if not failing:
        if exit_code == base_exit_code:
            return Judgment()
        return Judgment(
            unjudged=(
                f"no failing line to compare, and it exited {exit_code} where the base "
                f"exited {base_exit_code}"
            )
        )
    new = [line for line in failing if not on_base(line.template)]
    return Judgment(
        new=tuple(line.text.strip() for line in new[:MAX_NEW_SHOWN]), new_count=len(new)
    )


def failing_lines(log: Path, *, window_bytes: int) -> tuple[FailingLine, ...]:
    """The lines of ``log``'s last ``window_bytes`` the failure reading ranks, one per
    template. Raises OSError for a log that cannot be read."""
    scan = scan_hits(log, window_bytes, words=True)
    return tuple(
        FailingLine(hit.template, hit.text)
        for hit in scan.hits
        if ranking.score(
            hit.signature.rank,
            hit.text,
            count=hit.count,
            known=None,
            words_only=hit.signature is WORDS,
        )
        > 0
    )


def base_templates(log: Path, *, check: str, repo: str, max_bytes: int) -> Baseline:
    """The templates of every line of the base's failing log (its last ``max_bytes``),
    as a baseline of that one run (its ``knows`` is the ``on_base`` of ``judge``).
    Raises OSError for a log that cannot be read."""
    return learn(None, log, check=check, repo=repo, max_log_bytes=max_bytes)
