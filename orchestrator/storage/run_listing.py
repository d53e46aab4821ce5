"""The head of each run record, for a listing (``orchestrator runs``): its id, ticket,
state, stage and times, read without validating the record, and without parsing all of it.

A record is written as ``model_dump_json(indent=2)``: its scalar members first, then
``"stages"``, the attempts and the rest. Only the part before ``"stages"`` is parsed
(issue 41: a week of cron leaves thousands of records, and parsing every attempt of each
was most of what ``runs`` spent). A record laid out otherwise (written by hand, by an
older version, by a script) or cut short is parsed whole, so the answer is the same
either way, a damaged record's refusal included.

Imports nothing heavy (no pydantic): ``runs`` must start in a few tens of milliseconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from orchestrator.storage.layout import record_names

# Where the scalar head of a record as the store writes it ends; a JSON string cannot
# hold a raw newline, so this is the top-level member, never text inside a value.
_HEAD_END = b'\n  "stages": ['
# How the store's record ends: the top-level object's close, alone on its line (a nested
# one is indented). A record cut short ends otherwise.
_WHOLE_END = b"\n}"
_READ = 1 << 16


def run_headers(
    runs_dir: Path,
    keys: Collection[str],
    also: Collection[str] = (),
    ticket_ids: Collection[str] | None = None,
) -> Iterator[tuple[str, dict[str, Any] | str]]:
    """Each run record of ``runs_dir`` (of ``ticket_ids`` only, if given: no other is
    read) in name order (its path, as text), as its members (every one of ``keys``, and
    ``also`` where the record has them), or as why it cannot be read (a message, for a
    warning)."""
    directory = os.fspath(runs_dir)
    wanted = (*keys, *also)
    for _, name in record_names(runs_dir, ticket_ids):
        path = os.path.join(directory, name)
        found: dict[str, Any] | str
        try:
            found = read_run_header(path, keys, wanted)
        except (OSError, ValueError) as exc:
            found = str(exc)
        yield path, found


def read_run_header(
    path: str, keys: Collection[str], head_keys: Collection[str] = ()
) -> dict[str, Any]:
    """The record's members before ``"stages"`` when they hold every one of
    ``head_keys`` (by default ``keys``), else all of its members (``read_record_head``).
    ValueError when it is not a JSON object with ``keys``."""
    found = read_record_head(path, head_keys or keys)
    if not isinstance(found, dict) or not all(k in found for k in keys):
        raise ValueError("missing run record fields")
    return found


def read_record_head(path: str, head_keys: Collection[str]) -> Any:
    """The record's members before ``"stages"`` when they hold every one of
    ``head_keys`` and the record ends as the store ends one (a record cut short is then
    parsed whole, and refused as before); else the whole file's JSON value. OSError when
    it cannot be read, ValueError when it is not JSON."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        data = os.read(fd, _READ)
        while len(data) % _READ == 0 and (chunk := os.read(fd, _READ)):
            data += chunk
    finally:
        os.close(fd)
    cut = data.find(_HEAD_END)
    whole = data.endswith(_WHOLE_END) or data.rstrip().endswith(_WHOLE_END)
    if cut > 0 and data[cut - 1 : cut] == b"," and whole:
        try:
            head = json.loads(data[: cut - 1].decode() + "\n}")
        except ValueError:
            head = None
        if isinstance(head, dict) and all(k in head for k in head_keys):
            return head
    return json.loads(data)
