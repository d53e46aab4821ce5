"""Reading a verdict out of a model's reply: exactly one JSON object, shaped as one of
the closed vocabulary's verdicts (``orchestrator/domain/verdicts.py``).

1. Shape (``parse_verdict``): exactly one JSON object (a single ```json fence around the
   whole reply is tolerated; prose is not), a discriminated union on ``action`` with
   ``extra="forbid"``, strict types and a length cap on every string and list. The reply
   is untrusted input: it is parsed with bounded nesting (counted before the parser can
   recurse) and refused when it holds duplicate keys, NaN or Infinity, numbers out of
   range or too long, or lone surrogates; nothing here raises, whatever came.
2. Meaning (``semantic_errors`` in ``orchestrator/domain/vocabulary.py``): the verdict
   must make sense for *this* failure — the engine exists and differs, the ladder has a
   higher model, the verification check is the one that failed, the recipe passes the
   allow-list and stays inside the clone.

Anything that fails either step is not a verdict; the caller turns it into
``abandon-human`` (never a guess).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import ValidationError

from orchestrator.domain.validation import describe_validation_error
from orchestrator.domain.verdicts import VERDICT_ADAPTER, Action, Verdict

MAX_REPLY_CHARS = 64_000
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)


# A verdict nests four levels deep (the reply, repair_plan, commands, a command); a reply
# nested deeper than this is not a verdict, and is refused before the parser recurses.
MAX_JSON_DEPTH = 16
# Far beyond any number a verdict holds, far below the interpreter's int-str limit.
MAX_NUMBER_CHARS = 100
MAX_ERROR_CHARS = 300
LONE_SURROGATES = "reply holds a lone surrogate (not valid Unicode text)"


class _Refused(ValueError):
    """A JSON value the parser saw and refused (a duplicate key, NaN, a huge number)."""


def _nesting_depth(text: str) -> int:
    """How deep ``text``'s brackets nest outside string literals: counted before parsing,
    so a reply nested ten thousand deep never reaches the recursive parser."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(f"duplicate key {shown_short(key)}")
        seen[key] = value
    return seen


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number with {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _Refused(f"a number {len(text)} characters long")
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the number {text[:40]} is out of range")
    return value


def shown_short(value: object) -> str:
    """``repr`` cut short: escapes lone surrogates and control characters, so what is
    shown is always printable and always valid UTF-8."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def has_surrogate(text: str) -> bool:
    """A lone surrogate: text that has no UTF-8 form (JSON's ``\\ud800`` escape makes one)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def json_oddity(value: object) -> str | None:
    """Why ``value`` is not a plain, bounded JSON value, or None when it is: nesting past
    ``MAX_JSON_DEPTH``, a lone surrogate in a key or a string, a non-finite or huge number,
    a key that is not a string, a type JSON does not have. Walks with its own stack, so
    it never recurses however deep the value goes."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return f"nested deeper than {MAX_JSON_DEPTH} levels"
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, str):
            if has_surrogate(item):
                return f"a string holds a lone surrogate: {shown_short(item)}"
        elif isinstance(item, int):
            if item.bit_length() > MAX_NUMBER_CHARS * 4:
                return "a number is too large"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r} is not a JSON number"
        elif isinstance(item, list | tuple):
            stack.extend((member, depth + 1) for member in item)
        elif isinstance(item, dict):
            for key, member in item.items():
                if not isinstance(key, str):
                    return f"a key is not a string: {shown_short(key)}"
                if has_surrogate(key):
                    return f"a key holds a lone surrogate: {shown_short(key)}"
                stack.append((member, depth + 1))
        else:
            return f"{type(item).__name__} is not a JSON value"
    return None


def parse_reply(text: str) -> tuple[object | None, str | None]:
    """The reply must be exactly one JSON object; prose before or after is malformed.
    Never raises: whatever the model sent, the answer is a plain bounded JSON object
    (no lone surrogates, no NaN, no huge numbers, no duplicate keys) or the reason why
    not."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group("body").strip()
    if len(stripped) > MAX_REPLY_CHARS:
        return None, f"reply is longer than {MAX_REPLY_CHARS} characters"
    if has_surrogate(stripped):
        return None, LONE_SURROGATES
    # Counting brackets is C-fast; the character walk runs only when there are enough.
    brackets = stripped.count("[") + stripped.count("{")
    if brackets > MAX_JSON_DEPTH and _nesting_depth(stripped) > MAX_JSON_DEPTH:
        return None, f"reply is nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        value = json.loads(
            stripped,
            object_pairs_hook=_no_duplicates,
            parse_constant=_constant,
            parse_int=_int,
            parse_float=_float,
        )
    except json.JSONDecodeError as exc:
        return None, f"reply is not a single JSON object ({exc.msg} at position {exc.pos})"
    except _Refused as exc:
        return None, f"reply is not plain JSON: {exc}"
    except (ValueError, RecursionError) as exc:  # the counted depth is the real guard
        return None, f"reply is not plain JSON: {type(exc).__name__}"
    if not isinstance(value, dict):
        return None, f"reply is JSON but not an object (got {type(value).__name__})"
    oddity = json_oddity(value)
    if oddity is not None:
        return None, f"reply is not plain JSON: {oddity}"
    return value, None


def parse_verdict(text: str) -> tuple[Verdict | None, list[str]]:
    """Shape validation of a model's reply: (verdict, []) or (None, errors)."""
    value, error = parse_reply(text)
    if error is not None:
        return None, [error]
    return validate_verdict_object(value)


def _short(error: str) -> str:
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 3] + "..."


def validate_verdict_object(value: object) -> tuple[Verdict | None, list[str]]:
    """Shape validation of an already-parsed object (playbook verdicts come this way).
    Never raises, whatever ``value`` is: an oddity is a validation error like any."""
    oddity = json_oddity(value)
    if oddity is not None:
        return None, [f"not a plain JSON value: {oddity}"]
    if not isinstance(value, dict):
        return None, [f"(top level): expected a JSON object (got {type(value).__name__})"]
    action = value.get("action")
    if "action" in value and not (isinstance(action, str) and action in set(Action)):
        allowed = ", ".join(a.value for a in Action)
        return None, [_short(f"action: {shown_short(action)} is not one of: {allowed}")]
    try:
        # JSON mode: strict types, and JSON arrays fill the tuple fields.
        return VERDICT_ADAPTER.validate_json(json.dumps(value)), []
    except ValidationError as exc:
        # Errors inside a union member carry its tag first ("mechanical-fix.summary"):
        # the user-facing path is the field's own.
        tags = tuple(f"{a.value}." for a in Action)
        return None, [
            _short(e.removeprefix(next((t for t in tags if e.startswith(t)), "")))
            for e in describe_validation_error(exc)
        ]
    except (ValueError, TypeError, RecursionError) as exc:
        return None, [f"not a plain JSON value: {type(exc).__name__}"]
