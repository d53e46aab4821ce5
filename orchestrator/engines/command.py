"""Engine ``command``: any program, from an argv template in config.

    [engines.my-agent]
    kind = "command"
    command = ["my-agent", "--task", "{prompt_file}", "--model", "{model}"]
    models = ["small", "large"]

The prompt (``build_prompt``) is always written to ``runs/<run>/prompt-<attempt>.txt``.
Placeholders, substituted inside every argument (braces that are not one stay as written):
    {prompt_file}   that prompt file            {model}      the attempt's model
    {clone}         the clone (the working dir) {run_dir}    the run's directory
    {ticket_id}     the ticket's id             {python}     the orchestrator's interpreter
Settings: ``command`` (required, a non-empty list of strings); ``prompt_on_stdin`` (bool,
default false): also give the prompt file as the program's standard input.

A command has no output format we can know, so (after our timeout, which is ``timeout``):
    exit 0                                                 → success
    could not start (126/127) or killed by a signal        → engine_error
    any other non-zero exit: the last 40 lines of its output (the place a program prints
      why it stopped) name an infra cause (``classify.match_infra``) → that class,
      else                                                 → code
The tail, not the whole output, is searched: a command that runs the project's tests may
print plenty about rate limits earlier on while failing for an ordinary reason.
"""

from __future__ import annotations

import sys

from orchestrator.domain.placeholders import ENGINE_PLACEHOLDERS
from orchestrator.engines.base import (
    Adapter,
    EngineReport,
    EngineTask,
    FailureClass,
    Invocation,
    build_prompt,
    string_list,
)
from orchestrator.engines.classify import crashed, last_words, match_infra, output_lines

TAIL_LINES = 40


class CommandAdapter(Adapter):
    name = "command"

    def invocation(self, task: EngineTask) -> Invocation:
        prompt_file = task.prompt_path()
        values = {
            "prompt_file": str(prompt_file),
            "model": task.model,
            "clone": str(task.clone_dir),
            "run_dir": str(task.run_dir),
            "ticket_id": task.ticket_id,
            "python": sys.executable,
        }
        argv = []
        for template in string_list(task.settings, "command"):
            arg = template
            # The names the config was checked against at load (domain/placeholders.py).
            for name in ENGINE_PLACEHOLDERS:
                arg = arg.replace(f"{{{name}}}", values[name])
            argv.append(arg)
        if not argv:
            raise ValueError("command: must name a program (got an empty command)")
        on_stdin = task.settings.get("prompt_on_stdin", False) is True
        return Invocation(
            argv=tuple(argv),
            stdin_path=prompt_file if on_stdin else None,
            files={prompt_file: build_prompt(task)},
        )

    def report(self, output: str, exit_code: int, timed_out: bool) -> EngineReport:
        def done(failure: FailureClass | None, detail: str | None) -> EngineReport:
            return EngineReport(None, None, None, failure, detail)

        if timed_out:
            return done(FailureClass.TIMEOUT, "stopped by the stage timeout")
        if exit_code == 0:
            return done(None, None)
        said = last_words(output)
        detail = f"exit {exit_code}" + (f": {said}" if said else "")
        if crashed(exit_code):
            return done(FailureClass.ENGINE_ERROR, detail)
        tail = "\n".join(output_lines(output)[-TAIL_LINES:])
        return done(match_infra(tail) or FailureClass.CODE, detail)


ADAPTER = CommandAdapter()
