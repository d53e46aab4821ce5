"""Hypothesis strategies for what a hostile or broken model may reply: any JSON value in
any field (lone surrogates, NaN, huge numbers included), nesting far past any parser's
comfort, duplicate keys, and text that is not JSON at all."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

VERDICT_FIELDS = ("action", "summary", "engine", "sub_tickets", "repair_plan")
ACTIONS = (
    "retry", "escalate-model", "switch-engine", "split", "abandon-human", "mechanical-fix",
)  # fmt: skip

lone_surrogates = st.integers(0xD800, 0xDFFF).map(chr)
# Text with, now and then, a lone surrogate in it (hypothesis's text never has one).
texts = st.text(max_size=20) | st.builds(
    lambda before, surrogate, after: before + surrogate + after,
    st.text(max_size=5),
    lone_surrogates,
    st.text(max_size=5),
)
numbers = st.integers() | st.floats(allow_nan=True, allow_infinity=True)
# Digits past Python's int-str conversion limit (4300): json.loads raises ValueError.
huge_integers = st.integers(min_value=4_301, max_value=12_000).map(lambda n: "9" * n)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)


def nested(depth: int, kind: str) -> str:
    """``depth`` levels of lists or objects, as JSON text (built without recursion)."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


deep_texts = st.builds(
    nested, st.integers(min_value=17, max_value=12_000), st.sampled_from(["list", "object"])
)
# A verdict-shaped object whose fields hold anything at all.
verdict_shaped = st.fixed_dictionaries(
    {"action": st.sampled_from(ACTIONS) | json_values},
    optional={
        "summary": st.just("why") | json_values,
        "engine": json_values,
        "sub_tickets": json_values,
        "repair_plan": json_values,
        "extra": json_values,
    },
)


def _dump(value: Any, ascii_only: bool) -> str:
    # ensure_ascii writes a lone surrogate as its \ud800 escape; without it, as the raw
    # code point (a str no UTF-8 encoder accepts). NaN and Infinity as their literals.
    return json.dumps(value, ensure_ascii=ascii_only)


hostile_replies = st.one_of(
    st.builds(_dump, verdict_shaped, st.booleans()),
    st.builds(_dump, json_values, st.booleans()),  # a top-level non-object, often
    deep_texts,
    deep_texts.map(lambda inner: '{"action": ' + inner + ', "summary": "x"}'),
    huge_integers.map(lambda digits: '{"action": "retry", "summary": ' + digits + "}"),
    st.sampled_from(
        [
            '{"action": "retry", "action": "abandon-human", "summary": "dup"}',
            '{"action": "retry", "summary": 1e999}',
            '{"action": "retry", "summary": NaN}',
            '{"action": -Infinity, "summary": "x"}',
            '{"action": ' + "9" * 10_000 + ', "summary": "x"}',
            '{"action": "retry", "summary": "\\ud800"}',
            '{"action": ["retry"], "summary": "x"}',
            '{"action": {"retry": 1}, "summary": "x"}',
            '{"action": "retry", "summary": "' + "x" * 70_000 + '"}',
        ]
    ),
    texts,  # raw non-JSON text, surrogates included
)
