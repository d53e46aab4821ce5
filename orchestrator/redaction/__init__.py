"""Secret redaction for everything that leaves the process (the context bundle above all).

The bottom layer: it imports nothing from ``orchestrator``, only the standard library, so
every other layer (reading, storage, recovery, execution, app) may redact what it keeps
or prints.

``redact`` replaces credentials with ``[REDACTED]``:

* the secrets the process holds, by value, as written, reversed, base64, URL-encoded or
  hex (``held``: the values come from the environment and the config, ``hold``);
* token shapes that are secrets on their own, wherever they stand (``vendors``);
* private-key blocks and the ``data:`` values of a Kubernetes ``Secret`` (``blocks``);
* values found by their name or the syntax around them: a setting named a secret, a
  password in a URL, an ``Authorization`` header, ``-u user:password`` (``name_rules``,
  with ``names`` deciding which names say secret);
* long random-looking runs (``entropy``);

and keeps what carries no information (``placeholders``: ``${VAR}``, ``ghp_xxxx``, a path,
a reference to code) and what is public or ciphertext (certificates, SOPS ``ENC[...]``).

    core.py          the pass: every rule in order; redact, redact_bytes
    held.py          the held secrets by value and encoding; the process's registry
    vendors.py       the token-shape table (vendor prefixes as a trie, JWTs, webhooks ...)
    names.py         which names say their value is a secret
    name_rules.py    NAME=value and its relatives, URLs, headers, flags; their rewrites
    blocks.py        PEM private and public blocks, Kubernetes Secrets, SOPS ciphertext
    entropy.py       the random-looking-run rule
    placeholders.py  REDACTED, and the values that carry no information
    words.py         how a run reads: words of an identifier or a path, numbers, hex
    edges.py         drop_cut_edges: a cut window's partial edge lines, before redaction
    personal.py      scrub: secrets and personal data (e-mail, phone, card numbers) out of
                     what a model said; rewrite_refusal: a recipe command scrubbing would change

Real CI logs, reviewed to hold no credential (``../shared/data/ci-logs``), are the measure
of what this costs: ``bench/redaction_negatives.py --logs`` counts the lines it alters and
the rule behind each; ``tests/redaction/test_redaction_real_logs.py`` holds it to at most
0.5 % of them (issue 25).

Recall before over-redaction: where a secret and a diagnosis conflict, the secret wins; a
key in form is redacted even when another scanner's test data calls it a negative.

Linear time on any input: Python's ``re`` backtracks, so every pattern either starts only
at the beginning of a run of its characters (a negative lookbehind) and consumes that run
possessively (``++``, ``*+``: Python 3.11), or has a bounded length.
``tests/redaction/test_redact.py`` pins this on 1 MB inputs.
"""

from __future__ import annotations

from orchestrator.redaction.core import redact, redact_bytes
from orchestrator.redaction.edges import drop_cut_edges
from orchestrator.redaction.held import HeldSecrets, hold, holding, process_held
from orchestrator.redaction.personal import SCRUB_MARKS, rewrite_refusal, scrub
from orchestrator.redaction.placeholders import REDACTED

__all__ = [
    "REDACTED",
    "SCRUB_MARKS",
    "HeldSecrets",
    "drop_cut_edges",
    "hold",
    "holding",
    "process_held",
    "redact",
    "redact_bytes",
    "rewrite_refusal",
    "scrub",
]
