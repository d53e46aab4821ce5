"""Measurement: what our redaction alters that is not a secret, and what it still removes.

    python bench/redaction_negatives.py             # both measurements below
    python bench/redaction_negatives.py --logs      # real CI logs only
    python bench/redaction_negatives.py --corpus    # the scanners' corpus only
    python bench/redaction_negatives.py --examples 5   # also: up to 5 altered lines per rule
    python bench/redaction_negatives.py --list      # also: each altered corpus negative

Real CI logs (issue 25). ``shared/data/ci-logs/*/log.txt`` beside the project: real
build and test logs, reviewed to hold no credential, so every line redaction alters is
information the model no longer sees. A log is read as the context bundle reads it (its
terminal rendering, decoded with U+FFFD for bad bytes, look-alike characters folded:
``reader_view``) and measured two ways:

  whole log    ``redact`` over the whole log, then compared line by line: what the bundle
               does (it redacts a whole excerpt), so a value found on one line is also
               removed where it repeats on another;
  line by line ``redact`` over each line alone: what a caller that redacts one line at a
               time (the telling line, a log line) sees.

A line counts as altered when its redacted text differs from it. Lines are the pieces of
the text split at ``\\n`` (a final line break ends the last line, it does not start
another). Goal: at most 0.5 % of the lines altered, both ways. Each altered line (whole
log) is counted under the first of our rules that altered it (``rule_of_lines``), so a
figure names the rule to look at. Only the logs print text (``--examples``): they are
public and hold no secret.

The scanners' corpus (``shared/data/secret-samples.json``, true positives and negatives
from the gitleaks, detect-secrets and trufflehog suites): recall three ways, as
``tests/redaction/test_redact_corpus.py`` measures it (goals: >= 95 % as written and on diff
lines, >= 55 % alone in a log line), and which negatives we alter. Those negatives mean
"this scanner's rule must not fire here", not "there is no secret here"; the old target of
at most 15 % of them altered is retired (issue 25): the project's rule that a value under
a name saying TOKEN, PASSWORD, API_KEY ... is redacted whatever it looks like alters about
20 % of them by itself. Printed for what they say:

  by rule      each altered negative under the first of our rules that altered it;
  names alone  our name rules with no token shape and no entropy rule, with that
               configuration's recall;
  twins        negatives whose text is, byte for byte, a true positive's text;
  carriers     negatives that hold, verbatim, a true positive's secret that ``redact``
               removes even alone in a log line with no telling name;
  floor        the negatives that are any of the three: what any redactor that keeps the
               rule on secret names and the recall it has must alter.

Nothing here prints a corpus secret: samples are named by id, provider and rule. The exit
code is 0, or 2 when neither data set is here. Not run by ``dev.sh bench`` (no speed
target); ``tests/redaction/test_redaction_real_logs.py`` holds the goals.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _place in (ROOT, HERE):  # the project, and the comparison script beside this one
    if str(_place) not in sys.path:
        sys.path.insert(0, str(_place))

from compare_redactors import CORPUS, TARGETS, Corpus, in_log_line, load_corpus, score  # noqa: E402

from orchestrator import redaction  # noqa: E402
from orchestrator.domain.terminal import plain_bytes  # noqa: E402
from orchestrator.recovery.cleaning import neutralise_unicode  # noqa: E402
from orchestrator.redaction import blocks, core, name_rules, vendors  # noqa: E402
from orchestrator.redaction.entropy import redact_random_runs  # noqa: E402

# Beside the project (CI, the main checkout); a git worktree sits one level deeper.
_PLACES = [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
CI_LOGS = next(
    (p / "data" / "ci-logs" for p in _PLACES if (p / "data" / "ci-logs").is_dir()),
    _PLACES[0] / "data" / "ci-logs",
)
# Issue 25: at most this share of real CI log lines altered, whole log and line by line.
LOG_LINES_ALTERED_GOAL = 0.005


class Stage(NamedTuple):
    """One of ``redact``'s steps: the family it is counted under for the corpus, the rule's
    own name for the logs, and the step itself."""

    family: str
    rule: str
    apply: Callable[[str, set[str]], str]


def _sub(pattern: object, rewrite: Callable[..., str]) -> Callable[[str, set[str]], str]:
    def stage(text: str, found: set[str]) -> str:
        return pattern.sub(partial(rewrite, found), text)  # type: ignore[attr-defined,no-any-return]

    return stage


_URL_HEADER_USER = "credential in a URL, header or -u"
# Each name rule's own name and family, in ``name_rules.NAME_RULES``'s order.
_NAME_RULE_NAMES: dict[int, tuple[str, str]] = {
    id(vendors.RARE_TOKEN): ("token shape", "rare token shape (webhook, bot token ...)"),
    id(name_rules._VENDOR_NAMED): ("secret name", "key after a vendor's or a key's name"),
    id(name_rules._URL_PASSWORD): (_URL_HEADER_USER, "password in a URL"),
    id(name_rules._URL_SIGNATURE): (_URL_HEADER_USER, "signature of a signed URL"),
    id(name_rules._USER_FLAG): (_URL_HEADER_USER, "-u user:password"),
    id(name_rules._SECRET_FLAG): ("secret name", "--token value (a flag named secret)"),
    id(name_rules._AUTH_HEADER): (_URL_HEADER_USER, "Authorization header"),
    id(name_rules._COMPARISON): ("secret name", "literal compared with a secret name"),
    id(name_rules._CALL_ARG): ("secret name", "literal passed with a secret name"),
    id(name_rules._ASSIGNMENT): ("secret name", "value assigned to a secret name"),
    id(name_rules._LOOSE_NAME): ("secret name", "value after a secret word (loose)"),
}
# ``redact``'s steps in its order (``_redact_unfiltered``: every name rule over the whole
# text, which tests pin equal to ``redact``).
STAGES: tuple[Stage, ...] = (
    Stage("private-key block", "private-key block", lambda text, found: blocks.redact_pem(text)),
    Stage(
        "Kubernetes Secret", "Kubernetes Secret", lambda text, found: blocks.redact_k8s_secret(text)
    ),
    Stage(
        "token shape",
        "token shape (vendor prefix, JWT ...)",
        _sub(vendors.TOKEN, vendors.rewrite_token),
    ),
    Stage("secret name", "XML key/value", _sub(name_rules.XML_KEY_VALUE, name_rules.head_value)),
    Stage("secret name", "XML element", _sub(name_rules.XML_ELEMENT, name_rules.head_value)),
    *(
        Stage(*_NAME_RULE_NAMES[id(pattern)], _sub(pattern, rewrite))
        for pattern, rewrite, _needles in name_rules.NAME_RULES
    ),
    Stage("random-looking run", "random-looking run", redact_random_runs),
    Stage("secret name", "a found value repeated", core._propagate),
)
NOT_BY_NAME = frozenset({"token shape", "random-looking run"})
# What a log line altered only by a value found on a line that was not altered counts
# under (a value on the line after its ``<password>``, a block's inner line).
ELSEWHERE = "a value or block found on another line"


def first_rule(text: str, stages: tuple[Stage, ...] = STAGES) -> str | None:
    """The family of the first step that altered ``text``, or None."""
    found: set[str] = set()
    first = None
    for stage in stages:
        changed = stage.apply(text, found)
        if changed != text and first is None:
            first = stage.family
        text = changed
    return first


def names_alone(text: str) -> str:
    found: set[str] = set()
    for stage in STAGES:
        if stage.family not in NOT_BY_NAME:
            text = stage.apply(text, found)
    return text


# ---- real CI logs -----------------------------------------------------------------------


def reader_view(data: bytes) -> str:
    """A log's bytes as the context bundle hands them to ``redact``
    (``recovery.context.excerpts._excerpt`` with ``log=True``): what a terminal shows, decoded with
    U+FFFD for undecodable bytes, look-alike characters folded."""
    return neutralise_unicode(plain_bytes(data).decode("utf-8", errors="replace"))


def log_lines(text: str) -> list[str]:
    """The lines of ``text``: split at ``\\n``; a final line break ends the last line."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" and len(lines) > 1 else lines


def altered_lines(before: list[str], after: list[str]) -> list[int]:
    """Indices of the lines of ``before`` that ``after`` changed. Redaction keeps line
    breaks except inside a private-key block (a block becomes one mark): where the counts
    differ, every line from the first difference on counts."""
    if len(before) == len(after):
        return [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    first = next(
        (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    return list(range(first, len(before)))


def rule_of_lines(lines: list[str]) -> list[str]:
    """For each of ``lines`` (lines ``redact`` altered), the rule that altered it first,
    found by running ``redact``'s steps over these lines alone (joined, in order). A line
    those steps leave alone was altered by what another line told (``ELSEWHERE``)."""
    text = "\n".join(lines)
    named: list[str | None] = [None] * len(lines)
    found: set[str] = set()
    for stage in STAGES:
        changed = stage.apply(text, found)
        if changed != text:
            now = changed.split("\n")
            if len(now) != len(lines):  # a block took lines with it: name what is left
                named = [n or stage.rule for n in named]
                break
            for i in altered_lines(text.split("\n"), now):
                named[i] = named[i] or stage.rule
            text = changed
    return [n or ELSEWHERE for n in named]


def altered_alone(
    text: str, whole: list[int], *, redact: Callable[[str], str] = redaction.redact
) -> set[str]:
    """The distinct lines of ``text`` that ``redact`` alters when each stands alone, given
    ``whole``: the indices of the lines redacting all of ``text`` altered.

    Only those lines and the lines of a certificate or public-key block (the one context
    that keeps a line ``redact`` would alter alone) are redacted alone: the rest of the
    text's context only adds (a value found on another line and repeated, a value on the
    line after its ``<password>``, a block), and a rule matches a line's start alike after
    a line break and at the start of the text. ``exhaustive_altered_alone`` redacts every
    line, and ``tests/bench/test_redaction_negatives.py`` holds the two equal on a log."""
    lines = log_lines(text)
    suspects = {lines[i] for i in whole}
    for start, end in blocks.public_blocks(text):
        suspects.update(text[start:end].split("\n"))
    return {line for line in suspects if redact(line) != line}


def exhaustive_altered_alone(
    text: str, *, redact: Callable[[str], str] = redaction.redact
) -> set[str]:
    """``altered_alone`` the slow way: every distinct line redacted alone."""
    return {line for line in dict.fromkeys(log_lines(text)) if redact(line) != line}


@dataclass
class LogFigures:
    """Lines altered over a set of logs, both ways, and by which rule (whole log)."""

    logs: int = 0
    lines: int = 0
    whole_log: int = 0
    line_by_line: int = 0
    by_rule: Counter[str] = field(default_factory=Counter)
    by_log: Counter[str] = field(default_factory=Counter)
    # rule -> (log, 1-based line number, the line, the line redacted), a few each
    examples: dict[str, list[tuple[str, int, str, str]]] = field(default_factory=dict)

    def share(self, altered: int) -> float:
        return altered / max(1, self.lines)


def log_paths(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*/log.txt") if p.is_file())


def measure_log(
    name: str,
    text: str,
    figures: LogFigures,
    *,
    redact: Callable[[str], str] = redaction.redact,
    keep_examples: int = 0,
) -> None:
    """Add one log's figures (``text`` as ``reader_view`` gives it) to ``figures``."""
    before = log_lines(text)
    after = log_lines(redact(text))
    whole = altered_lines(before, after)
    figures.logs += 1
    figures.lines += len(before)
    figures.whole_log += len(whole)
    figures.by_log[name] += len(whole)
    alone = altered_alone(text, whole, redact=redact)
    figures.line_by_line += sum(line in alone for line in before) if alone else 0
    if not whole:
        return
    for index, rule in zip(whole, rule_of_lines([before[i] for i in whole]), strict=True):
        figures.by_rule[rule] += 1
        kept = figures.examples.setdefault(rule, [])
        if len(kept) < keep_examples:
            redacted = after[index] if index < len(after) else ""
            kept.append((name, index + 1, before[index], redacted))


def measure_logs(
    paths: Iterable[Path],
    *,
    redact: Callable[[str], str] = redaction.redact,
    keep_examples: int = 0,
) -> LogFigures:
    """The figures over ``paths`` (``log.txt`` files; a log is named by its directory)."""
    figures = LogFigures()
    for path in paths:
        measure_log(
            path.parent.name,
            reader_view(path.read_bytes()),
            figures,
            redact=redact,
            keep_examples=keep_examples,
        )
    return figures


def _shown(line: str, redacted: str, width: int = 150) -> tuple[str, str]:
    """Both lines from a little before their first difference, cut to ``width``."""
    at = next((i for i, (a, b) in enumerate(zip(line, redacted, strict=False)) if a != b), 0)
    start = max(0, at - 40)
    return line[start : start + width], redacted[start : start + width]


def print_log_figures(figures: LogFigures, *, top: int = 8) -> None:
    print(f"real CI logs ({CI_LOGS}): {figures.logs} logs, {figures.lines:,} lines")
    goal = f"(goal: at most {LOG_LINES_ALTERED_GOAL:.1%})"
    for way, altered in (("whole log", figures.whole_log), ("line by line", figures.line_by_line)):
        print(f"  lines altered, {way + ':':14}{altered:7,}  {figures.share(altered):6.2%}  {goal}")
    print("  altered lines by the first rule that altered them (whole log):")
    for rule, count in figures.by_rule.most_common(top):
        print(f"    {rule + ':':46}{count:7,}")
    print("  logs with the most altered lines (whole log):")
    for log, count in figures.by_log.most_common(5):
        if count:
            print(f"    {log + ':':46}{count:7,}")
    for rule, kept in figures.examples.items():
        print(f"  examples of {rule}:")
        for log, number, line, redacted in kept:
            was, now = _shown(line, redacted)
            print(f"    {log}:{number}\n      {was}\n    ->{now}")


# ---- the scanners' corpus ---------------------------------------------------------------

_BARE_WORD = re.compile(r"[A-Za-z]+")


def plain_line_secrets(positives: list[dict[str, Any]]) -> set[str]:
    """The positives' secrets (10+ characters, not a bare word such as ``password``) that
    ``redact`` removes even alone in a log line with no telling name."""
    return {
        secret
        for sample in positives
        for secret in sample["secrets"]
        if len(secret) >= 10
        and not _BARE_WORD.fullmatch(secret)
        and secret not in redaction.redact(in_log_line(secret))
    }


def print_corpus_figures(corpus: Corpus, *, listed: bool) -> None:
    negatives = corpus.negatives
    total = len(negatives)

    def pct(n: int) -> str:
        return f"{n:4d}  {n / total:6.1%}"

    texts = corpus.texts()
    ours = score(corpus, {t: redaction.redact(t) for t in texts})
    print(f"scanners' corpus ({CORPUS.name}): {len(corpus.positives)} positives, {total} negatives")
    for way, value in (
        ("as written", ours.as_written),
        ("diff lines", ours.diff_lines),
        ("log line", ours.log_line),
    ):
        print(f"  recall {way + ':':22}{value:6.1%}   (goal: at least {TARGETS[way]:.0%})")
    by_rule = {s["id"]: first_rule(s["text"]) for s in negatives}
    altered = [s for s in negatives if by_rule[s["id"]] is not None]
    print(f"altered by redact:           {pct(len(altered))}   (no target: see the docstring)")
    for family, count in Counter(str(by_rule[s["id"]]) for s in altered).most_common():
        print(f"  first by {family + ':':27}{pct(count)}")

    named = [s for s in negatives if names_alone(s["text"]) != s["text"]]
    alone = score(corpus, {t: names_alone(t) for t in texts})
    print(
        f"altered by the names alone:  {pct(len(named))}   (recall then: as written "
        f"{alone.as_written:.1%}, diff {alone.diff_lines:.1%}, log line {alone.log_line:.1%})"
    )
    positive_texts = {s["text"] for s in corpus.positives}
    twins = [s for s in negatives if s["text"] in positive_texts]
    print(f"twins of a true positive:    {pct(len(twins))}")
    carried = plain_line_secrets(corpus.positives)
    carriers = [s for s in negatives if any(secret in s["text"] for secret in carried)]
    print(f"carriers of a positive's secret: {pct(len(carriers))}")
    floor = {s["id"] for s in (*named, *twins, *carriers)}
    print(f"floor (any of the three):    {pct(len(floor))}")
    if listed:
        print()
        for sample in altered:
            mark = "twin " if sample in twins else "     "
            name = "name " if sample in named else "     "
            carrier = "carrier " if sample in carriers else "        "
            print(
                f"{sample['id']} {mark}{name}{carrier}{by_rule[sample['id']]:34} "
                f"{sample['provider'][:28]:28} {sample['rule'][:60]}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", action="store_true", help="the real CI logs only")
    parser.add_argument("--corpus", action="store_true", help="the scanners' corpus only")
    parser.add_argument("--list", action="store_true", help="name each altered negative")
    parser.add_argument(
        "--examples", type=int, default=0, metavar="N", help="show N altered log lines per rule"
    )
    args = parser.parse_args(argv)
    both = not (args.logs or args.corpus)
    ran = False
    if both or args.logs:
        if log_paths(CI_LOGS):
            print_log_figures(measure_logs(log_paths(CI_LOGS), keep_examples=args.examples))
            print()
            ran = True
        else:
            print(f"the real CI logs are not here: {CI_LOGS}", file=sys.stderr)
    if both or args.corpus:
        if CORPUS.is_file():
            print_corpus_figures(load_corpus(CORPUS, 1), listed=args.list)
            ran = True
        else:
            print(f"the shared corpus is not here: {CORPUS}", file=sys.stderr)
    return 0 if ran else 2


if __name__ == "__main__":
    raise SystemExit(main())
