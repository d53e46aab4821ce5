"""A small, strict reader of the Prometheus text exposition format (0.0.4), enough to
prove a metrics file is what node_exporter's textfile collector accepts: HELP and TYPE
lines before their family's samples, one TYPE per family, metric and label names by the
format's regular expressions, quoted label values with only the three escapes, float
values, no duplicate series, a final newline."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
SUFFIXES = {"summary": ("_sum", "_count", ""), "histogram": ("_sum", "_count", "_bucket")}


class FormatError(AssertionError):
    pass


@dataclass
class Family:
    name: str
    kind: str = "untyped"
    help: str | None = None
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)


def _labels(text: str, line: str) -> tuple[dict[str, str], str]:
    """Parse ``{a="x",b="y"}`` at the start of ``text``; return it and the rest."""
    labels: dict[str, str] = {}
    position = 1
    while True:
        if text[position] == "}":
            return labels, text[position + 1 :]
        match = re.match(r"[a-zA-Z_][a-zA-Z0-9_]*", text[position:])
        if match is None:
            raise FormatError(f"bad label name in {line!r}")
        name = match.group(0)
        position += len(name)
        if text[position : position + 2] != '="':
            raise FormatError(f'label {name} without ="…" in {line!r}')
        position += 2
        value = []
        while True:
            char = text[position]
            if char == "\\":
                escaped = text[position + 1]
                if escaped not in ("\\", '"', "n"):
                    raise FormatError(f"bad escape \\{escaped} in {line!r}")
                value.append("\n" if escaped == "n" else escaped)
                position += 2
            elif char == '"':
                position += 1
                break
            elif char == "\n":
                raise FormatError(f"newline in a label value: {line!r}")
            else:
                value.append(char)
                position += 1
        if name in labels:
            raise FormatError(f"label {name} twice in {line!r}")
        labels[name] = "".join(value)
        if text[position] == ",":
            position += 1
        elif text[position] != "}":
            raise FormatError(f"expected , or }} in {line!r}")


def _value(text: str, line: str) -> float:
    if text in ("+Inf", "-Inf", "NaN"):
        return {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}[text]
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise FormatError(f"not a float: {text!r} in {line!r}")
    return float(text)


def parse(text: str) -> dict[str, Family]:
    if text and not text.endswith("\n"):
        raise FormatError("the file must end with a newline")
    families: dict[str, Family] = {}
    sampled: set[str] = set()
    series: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not METRIC_NAME.match(name):
                    raise FormatError(f"bad metric name {name!r}")
                family = families.setdefault(name, Family(name))
                if name in sampled:
                    raise FormatError(f"{parts[1]} for {name} after its samples")
                if parts[1] == "TYPE":
                    kind = parts[3] if len(parts) == 4 else ""
                    if kind not in TYPES:
                        raise FormatError(f"bad type {kind!r} for {name}")
                    family.kind = kind
                else:
                    if family.help is not None:
                        raise FormatError(f"two HELP lines for {name}")
                    family.help = parts[3] if len(parts) == 4 else ""
            continue
        match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
        if match is None:
            raise FormatError(f"bad sample line {line!r}")
        name = match.group(0)
        rest = line[len(name) :]
        labels: dict[str, str] = {}
        if rest.startswith("{"):
            labels, rest = _labels(rest, line)
        fields = rest.strip().split(" ")
        if not rest.startswith(" ") or not 1 <= len(fields) <= 2:
            raise FormatError(f"bad sample line {line!r}")
        value = _value(fields[0], line)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise FormatError(f"bad timestamp in {line!r}")
        owner = None
        for family in families.values():
            for suffix in SUFFIXES.get(family.kind, ("",)):
                if name == family.name + suffix:
                    owner = family
        if owner is None:
            owner = families.setdefault(name, Family(name))
        key = (name, tuple(sorted(labels.items())))
        if key in series:
            raise FormatError(f"duplicate series {line!r}")
        series.add(key)
        sampled.add(owner.name)
        owner.samples.append((name, labels, value))
    return families
