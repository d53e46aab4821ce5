"""``orchestrator replay RUN_ID [--verdict N] [--json]``: does today's code reach the same
decision, and the same dispatch, from the persisted inputs and replies?

No model is called and nothing is executed or written (``orchestrator.app.replay``). Exit 0
when every replayed decision is identical, ``EXIT_DIFFERENT`` when any differs (or could
not be replayed at all); the differences are listed field by field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, TextIO

from orchestrator.app.replay import ReplayResult
from orchestrator.app.replay import replay as replay_run
from orchestrator.domain.config import load_config
from orchestrator.domain.errors import EXIT_DIFFERENT
from orchestrator.storage.run_ids import resolve_run_id
from orchestrator.storage.runs import RunStore

MAX_VALUE_CHARS: Final = 200


def show_value(value: Any) -> str:
    """A value as one short line: strings bare, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def render(result: ReplayResult) -> list[str]:
    if not result.replayable:
        lines = [f"verdict {result.number}: NOT REPLAYED"]
    elif result.identical:
        dispatch = result.dispatch.describe() if result.dispatch else "-"
        lines = [
            f"verdict {result.number}: identical (action {result.action}, routing "
            f"{result.routing}, dispatch {dispatch})"
        ]
    else:
        lines = [f"verdict {result.number}: DIFFERENT"]
    lines += [
        f"  {d.field}: {show_value(d.then)} → {show_value(d.now)}" for d in result.differences
    ]
    lines += [f"  note: {note}" for note in result.limitations]
    return lines


def replay(
    state_dir: Path,
    config_file: Path,
    run_id: str,
    number: int | None,
    out: TextIO,
    *,
    as_json: bool,
) -> int:
    store = RunStore(state_dir)
    run_id = resolve_run_id(store, run_id)
    results = replay_run(store, load_config(config_file), run_id, number)
    if as_json:
        for result in results:
            out.write(json.dumps({"run_id": run_id, **result.as_json()}, default=str) + "\n")
    elif not results:
        out.write(f"run {run_id} made no decisions: nothing to replay\n")
    else:
        for result in results:
            out.write("\n".join(render(result)) + "\n")
    return 0 if all(r.identical for r in results) else EXIT_DIFFERENT
