"""Shared pieces for turning pydantic's errors into one line a user can act on."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

# Scalars are strict (TOML `timeout_s = "5"` is an error, not a coercion); containers are
# lax so TOML arrays fill tuple fields.
Name = Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
NonEmptyStr = Annotated[StrictStr, Field(min_length=1, max_length=4096)]
PositiveSeconds = Annotated[float, Field(strict=True, gt=0, le=7 * 24 * 3600)]
Argv = Annotated[tuple[NonEmptyStr, ...], Field(min_length=1, max_length=256)]

M = TypeVar("M", bound=BaseModel)

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
    "named",
    "read_model",
    "toml_model",
]


class Frozen(BaseModel):
    """Base for every record that crosses a boundary: immutable, no unknown keys."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def revised(self, **update: Any) -> Self:
        """A copy with ``update`` applied and validated like a new record: what a
        field's validator does (redacting a stage's words, say) happens to the new
        values too, which ``model_copy`` would skip. Nested records are kept as they
        are (already valid)."""
        return self.model_validate({**self.__dict__, **update})


class _Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=_Named)


def named(records: Iterable[N], name: str) -> N:
    """The first of ``records`` (a config's stages, a run's, a bundle's sections) called
    ``name``; KeyError when none is."""
    for record in records:
        if record.name == name:
            return record
    raise KeyError(name)


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


def describe_validation_error(
    error: ValidationError, *, model: type[BaseModel] | None = None
) -> list[str]:
    """One line per problem: ``key.path: what was expected (got VALUE)``. Given the
    ``model`` that was validated, an unknown key also gets the closest known key at its
    level (``did you mean 'timeout_s'?``): a typo is the usual reason for one."""
    items = error.errors(include_url=False)
    # Pydantic re-checks a tuple's length after dropping invalid members and reports
    # "too short" for the container too; the member's own error is the one that helps.
    member_locs = [tuple(i["loc"]) for i in items]
    lines = []
    for item in items:
        loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and "[" in p))
        kind = item["type"]
        if kind == "too_short" and any(
            len(m) > len(item["loc"]) and m[: len(item["loc"])] == tuple(item["loc"])
            for m in member_locs
        ):
            continue
        where = key_path(loc)
        if kind == "missing":
            lines.append(f"{where}: required key is missing")
        elif kind == "extra_forbidden":
            guess = _closest_key(model, loc) if model is not None else None
            hint = f"; did you mean {guess!r}?" if guess else ""
            lines.append(f"{where}: unknown key (not allowed here){hint}")
        elif kind == "value_error":
            # Our own validators: the message already says what is wrong and with what.
            msg = item["msg"].removeprefix("Value error, ")
            lines.append(f"{where}: {msg}" if loc else msg)
        elif kind == "too_short":
            need = item.get("ctx", {}).get("min_length", 1)
            lines.append(f"{where}: expected at least {need} item(s) (got {_shown(item['input'])})")
        else:
            lines.append(f"{where}: {item['msg']} (got {_shown(item['input'])})")
    return lines


def _closest_key(model: type[BaseModel], loc: tuple[int | str, ...]) -> str | None:
    """The known key nearest to ``loc``'s last part, among the fields of the model found
    by walking ``loc`` through ``model``'s nested records (None: no model, or none close)."""
    import difflib

    current: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int) or current is None:
            continue  # a list member: the record type was already found from its field
        field = current.model_fields.get(part)
        current = _record_type(field.annotation) if field is not None else None
    if current is None or not loc or not isinstance(loc[-1], str):
        return None
    names = [f.alias or name for name, f in current.model_fields.items()]
    found = difflib.get_close_matches(loc[-1], names, n=1)
    return found[0] if found else None


def _record_type(annotation: Any) -> type[BaseModel] | None:
    """The record class inside a field's type: itself, or the member of an Optional,
    a union, a tuple, list or dict's values (the first record found)."""
    import typing

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _record_type(arg)
        if found is not None:
            return found
    return None


def toml_model(text: str, model: type[M], *, not_toml: str, guess: bool = False) -> M | list[str]:
    """``text`` read as TOML and validated as ``model``, or what is wrong with it, one line
    a problem: the TOML's own error after ``not_toml``, else each key's (``guess``: an
    unknown key with the closest known one)."""
    try:
        return model.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        return [f"{not_toml}: {exc}"]
    except ValidationError as exc:
        return describe_validation_error(exc, model=model if guess else None)


def read_model(path: Path, model: type[M], what: str) -> M | None:
    """A state file parsed into ``model``: None when it does not exist; a StateError
    naming the path and the reason when it cannot be read or is not a valid ``what``."""
    from orchestrator.domain.errors import StateError

    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"state error: {path}: cannot read: {exc.strerror}") from None
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(describe_validation_error(exc)[:3])
        raise StateError(f"state error: {path}: not a valid {what}: {problems}") from None
