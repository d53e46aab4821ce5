"""Measurement: which corpus negatives our redaction alters, and how many of them no
redactor can spare while it keeps the project's rule on secrets.

    python bench/redaction_negatives.py           # the whole corpus
    python bench/redaction_negatives.py --list    # also: each altered negative's id,
                                                  # provider and the rule that altered it

Issue 12 asks for at most 15 % of the negatives in ``shared/data/secret-samples.json`` to be
altered, beside recall targets (>= 95 % as written and on diff lines, >= 55 % in a log
line with no telling name). The corpus's negatives come from three scanners' test suites,
where a negative means "this rule must not fire here", not "there is no secret here". This
prints the figures that say what that means for us:

  by rule      each altered negative under the first of our rules that altered it (token
               shapes, values under a secret name, random-looking runs, the rest);
  names alone  our name rules with no token shape and no entropy rule: the values under a
               name that says password, token, secret or key (and URL, header and ``-u``
               credentials). The project's non-negotiable says such values never reach a
               log or the model, so this is the floor for any redactor that keeps it;
               printed with that configuration's recall;
  twins        negatives whose text is, byte for byte, a true positive's text (one
               scanner's negative is another's positive). A pure function alters both or
               neither;
  carriers     negatives that hold, verbatim, a true positive's secret (10+ characters,
               not a bare word) that ``redact`` removes even alone in a log line with no
               telling name: nothing there but the value's shape tells it is a secret,
               and the negative holds the same shape;
  floor        the negatives that are any of the three: what a redactor that keeps the
               rule on secrets and the recall it has must alter. Printed against the
               target's count; when the floor is over it, no redactor of that kind meets
               the target.

Nothing here prints a secret: samples are named by id, provider and rule. The exit code
is 0, or 2 without the corpus. Not run by ``dev.sh bench`` (it has no speed target).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _place in (ROOT, HERE):  # the project, and the comparison script beside this one
    if str(_place) not in sys.path:
        sys.path.insert(0, str(_place))

from compare_redactors import CORPUS, TARGETS, in_log_line, load_corpus, score  # noqa: E402

from orchestrator.recovery import redact as rules  # noqa: E402

Stage = tuple[str, Callable[[str, set[str]], str]]


def _sub(pattern: object, rewrite: Callable[..., str]) -> Callable[[str, set[str]], str]:
    def stage(text: str, found: set[str]) -> str:
        return pattern.sub(partial(rewrite, found), text)  # type: ignore[attr-defined,no-any-return]

    return stage


def _random(text: str, found: set[str]) -> str:
    return rules._CANDIDATE.sub(
        partial(rules._random_token, found, rules._public_blocks(text)), text
    )


# ``redact``'s steps in its order (``_redact_unfiltered``: every name rule over the whole
# text, which tests pin equal to ``redact``), each with the family it is counted under.
STAGES: tuple[Stage, ...] = (
    ("private-key block", lambda text, found: rules._redact_pem(text)),
    ("Kubernetes Secret", lambda text, found: rules._redact_k8s_secret(text)),
    ("token shape", _sub(rules._TOKEN, rules._token)),
    ("secret name", _sub(rules._XML_KEY_VALUE, rules._head_value)),
    ("secret name", _sub(rules._XML_ELEMENT, rules._head_value)),
    *(
        (
            "token shape"
            if pattern is rules._RARE_TOKEN
            else "credential in a URL, header or -u"
            if pattern
            in (rules._URL_PASSWORD, rules._URL_SIGNATURE, rules._USER_FLAG, rules._AUTH_HEADER)
            else "secret name",
            _sub(pattern, rewrite),
        )
        for pattern, rewrite, _needles in rules._NAME_RULES
    ),
    ("random-looking run", _random),
    ("secret name", rules._propagate),
)
NOT_BY_NAME = frozenset({"token shape", "random-looking run"})


def first_rule(text: str, stages: tuple[Stage, ...] = STAGES) -> str | None:
    found: set[str] = set()
    first = None
    for family, stage in stages:
        changed = stage(text, found)
        if changed != text and first is None:
            first = family
        text = changed
    return first


def names_alone(text: str) -> str:
    found: set[str] = set()
    for family, stage in STAGES:
        if family not in NOT_BY_NAME:
            text = stage(text, found)
    return text


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
        and secret not in rules.redact(in_log_line(secret))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="name each altered negative")
    args = parser.parse_args(argv)
    if not CORPUS.is_file():
        print(f"the shared corpus is not here: {CORPUS}", file=sys.stderr)
        return 2
    corpus = load_corpus(CORPUS, 1)
    negatives = corpus.negatives
    total = len(negatives)

    def pct(n: int) -> str:
        return f"{n:4d}  {n / total:6.1%}"

    by_rule = {s["id"]: first_rule(s["text"]) for s in negatives}
    altered = [s for s in negatives if by_rule[s["id"]] is not None]
    print(f"negatives: {total}; target: at most {TARGETS['negatives altered']:.0%} altered")
    print(f"altered by redact:           {pct(len(altered))}")
    for family, count in Counter(str(by_rule[s["id"]]) for s in altered).most_common():
        print(f"  first by {family + ':':27}{pct(count)}")

    named = [s for s in negatives if names_alone(s["text"]) != s["text"]]
    texts = corpus.texts()
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
    allowed = int(TARGETS["negatives altered"] * total)
    verdict = (
        "over the target: no redactor that keeps them meets it"
        if len(floor) > allowed
        else "within the target"
    )
    print(
        f"floor (any of the three):    {pct(len(floor))}   (target: at most {allowed}; {verdict})"
    )
    if args.list:
        print()
        for sample in altered:
            mark = "twin " if sample in twins else "     "
            name = "name " if sample in named else "     "
            carrier = "carrier " if sample in carriers else "        "
            print(
                f"{sample['id']} {mark}{name}{carrier}{by_rule[sample['id']]:34} "
                f"{sample['provider'][:28]:28} {sample['rule'][:60]}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
