"""``orchestrator doctor [--json]``: the preflight checklist — will a run succeed on this
machine with this config? — one line per check, each warning and failure with its fix.
Exit 0 when nothing fails (warnings allowed), 2 when a run cannot succeed.

``gate`` is the same checklist before a run's first stage: ``run``, ``resume``, ``batch``
(once, before any ticket) and ``batch --backend celery`` (once, before anything is
queued) call it. A failure stops the command with exit 2 before a run record, a ledger
row or a model call exists; warnings are printed once, one line each, and the run goes
on (``resume`` keeps them to itself: the run's start said them, and a resume that is
refused should say only why). ``--no-preflight`` skips it (scripts that checked already).
``gate`` lives in ``cli/preflight.py``, which the commands import (not this module).

``--json`` fields (one object):

- ``config``: the config file checked
- ``ok``: true when nothing failed (a run can go ahead; warnings allowed)
- ``checks``: the checklist, in order, each with:
- ``checks[].name``: the kind of check (stable, for scripts)
- ``checks[].status``: ok, skip, warn or fail
- ``checks[].detail``: what was found
- ``checks[].fix``: what to do ("" when ok)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from orchestrator.cli.preflight import checks as preflight_checks
from orchestrator.domain.errors import EXIT_COMPLETED, EXIT_USAGE


def doctor(
    config_file: Path,
    state_dir_override: str | None,
    out: TextIO,
    *,
    as_json: bool,
    environ: Mapping[str, str] = os.environ,
) -> int:
    from orchestrator.domain.config import load_config
    from orchestrator.domain.preflight import failed, line

    loaded = load_config(config_file)
    checks = preflight_checks(loaded, state_dir_override, environ, "doctor")
    ok = not failed(checks)
    if as_json:
        document = {
            "config": str(loaded.path),
            "ok": ok,
            "checks": [check.as_dict() for check in checks],
        }
        out.write(json.dumps(document, ensure_ascii=False) + "\n")
    else:
        out.write("".join(f"{line(check)}\n" for check in checks))
        counts = {s: sum(c.status == s for c in checks) for s in ("fail", "warn")}
        out.write(
            f"{counts['fail']} failed, {counts['warn']} warning(s): "
            + ("a run can go ahead\n" if ok else "a run cannot succeed here\n")
        )
    return EXIT_COMPLETED if ok else EXIT_USAGE
