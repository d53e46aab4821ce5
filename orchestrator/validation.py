"""Shared pieces for turning pydantic's errors into one line a user can act on."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

# Scalars are strict (TOML `timeout_s = "5"` is an error, not a coercion); containers are
# lax so TOML arrays fill tuple fields.
Name = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
NonEmptyStr = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
PositiveSeconds = Annotated[float, Field(strict=True, gt=0, le=7 * 24 * 3600)]
Argv = Annotated[tuple[NonEmptyStr, ...], Field(min_length=1, max_length=256)]

__all__ = [
    "Argv",
    "Frozen",
    "Name",
    "NonEmptyStr",
    "PositiveSeconds",
    "StrictBool",
    "StrictInt",
    "StrictStr",
    "describe_validation_error",
]


class Frozen(BaseModel):
    """Base for every record that crosses a boundary: immutable, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def key_path(loc: tuple[int | str, ...]) -> str:
    """``("stages", 1, "timeout_s")`` → ``stages[1].timeout_s``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_validation_error(error: ValidationError) -> list[str]:
    """One line per problem: ``key.path: what was expected (got VALUE)``."""
    lines = []
    for item in error.errors(include_url=False):
        # Union members and function validators add loc parts that name no key.
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and "[" in p))
        msg = item["msg"].removeprefix("Value error, ")
        if item["type"] == "missing":
            lines.append(f"{key_path(loc)}: required key is missing")
        elif item["type"] == "extra_forbidden":
            lines.append(f"{key_path(loc)}: unknown key (not allowed here)")
        else:
            lines.append(f"{key_path(loc)}: {msg} (got {_shown(item['input'])})")
    return lines
