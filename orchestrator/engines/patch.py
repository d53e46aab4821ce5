"""Engine ``patch``: the offline default. Applies the ticket's patch file
(``orchestrator/stages/implement_patch.py``); no model is involved, so the ladder's model is ignored.

It calls no provider, so nothing it prints can be an infrastructure failure: a patch that
does not apply (exit 1) is ``code``; only our timeout (``timeout``) and a crash status
(126/127, a signal: ``engine_error``) are not.
"""

from __future__ import annotations

import sys

from orchestrator.engines.base import (
    Adapter,
    EngineReport,
    EngineTask,
    FailureClass,
    Invocation,
)
from orchestrator.engines.classify import crashed, last_words

MODULE = "orchestrator.stages.implement_patch"


class PatchAdapter(Adapter):
    name = "patch"

    def invocation(self, task: EngineTask) -> Invocation:
        return Invocation(argv=(sys.executable, "-P", "-m", MODULE))

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        if timed_out:
            return EngineReport(
                None, None, None, FailureClass.TIMEOUT, "stopped by the stage timeout"
            )
        if exit_code == 0:
            return EngineReport(None, None, None, None, None)
        said = last_words(output)
        failure = FailureClass.ENGINE_ERROR if crashed(exit_code) else FailureClass.CODE
        return EngineReport(None, None, None, failure, said or f"exit {exit_code}")


ADAPTER = PatchAdapter()
