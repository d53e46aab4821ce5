"""The context bundle: what the model is shown about a failure, bounded and redacted.

Layer 1 of the sandwich ("Assemble the context"): the run's state, the ticket, the run
record, the evidence (the root-cause lines found anywhere in the end window of the failed
log, with their line numbers: ``reading.evidence``), the end of the failed stage's log, the
failing check's output and the head of the diff, each capped in bytes, all redacted, then
capped again as a whole. Content the log tail and the check's output share (a check's log
is usually the failed log itself) is sent once. The prompt,
and so the cost of a diagnosis, is bounded whatever the size of the failure: a file is
read by seeking to the part we keep, never in full.

Every excerpt is read with ``REDACTION_MARGIN_BYTES`` of extra context on its cut side,
redacted, and only then cut to its cap: a secret straddling the cap is recognised whole
and redacted before the cut, instead of surviving as an unrecognisable fragment. Partial
lines at a cut are dropped, which also drops a secret whose beginning lies beyond the
margin.

Pure apart from reading the files named in ``BundleInputs``: the same inputs give a
byte-identical bundle, and the bundle (a pydantic model) is persisted and reloaded as
JSON for replay.

The modules: ``text`` (delimiters defused, notes cleaned, directories labelled), ``model``
(the sections and the bundle), ``fit`` (text cut to a byte budget, the budget shared among
sections), ``excerpts`` (a bounded, redacted part of a file, bytes or text),
``evidence_section`` (the evidence section, and the shorter tail beside it) and
``assembly`` (``build_bundle``).
"""

from __future__ import annotations

from orchestrator.recovery.context.assembly import BundleInputs, build_bundle
from orchestrator.recovery.context.evidence_section import TAIL_BYTES_WITH_EVIDENCE
from orchestrator.recovery.context.excerpts import (
    REDACTION_MARGIN_BYTES,
    Excerpt,
    excerpt_of_bytes,
    excerpt_of_text,
    head_bytes,
    tail_bytes,
)
from orchestrator.recovery.context.fit import ALIGN_WINDOW_BYTES, allocate_bytes
from orchestrator.recovery.context.model import (
    PRIORITY,
    RENDER_PREAMBLE,
    SECTION_ORDER,
    ContextBundle,
    Section,
    SectionName,
)
from orchestrator.recovery.context.text import Roots, neutralise

__all__ = [
    "ALIGN_WINDOW_BYTES",
    "PRIORITY",
    "REDACTION_MARGIN_BYTES",
    "RENDER_PREAMBLE",
    "SECTION_ORDER",
    "TAIL_BYTES_WITH_EVIDENCE",
    "BundleInputs",
    "ContextBundle",
    "Excerpt",
    "Roots",
    "Section",
    "SectionName",
    "allocate_bytes",
    "build_bundle",
    "excerpt_of_bytes",
    "excerpt_of_text",
    "head_bytes",
    "neutralise",
    "tail_bytes",
]
