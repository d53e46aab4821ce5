"""What of an engine's work is the project's, and what is the engine's own (issue 42).
Pure: ``stages/engine_workspace.py`` applies it in the clone, tests pin it without one.

A coding engine writes files for itself beside the work: aider its chat history (the
whole prompt and every reply), its input history and its tags cache, and — unless told
``--no-gitignore`` — a ``.aider*`` line in ``.gitignore``. None of that is the ticket's
change, and a chat history pushed on a pull request publishes the prompt. So:

* a path the base commit does not hold, any part of whose name starts with one of
  ``ENGINE_OWN_PREFIXES`` (``.aider``), is the engine's own: left out of the commit. A
  path the project already tracks (its own ``.aider-notes.md``, an ``.aider.conf.yml``
  it keeps) is the project's, whatever its name: its change is committed.
* an ignore file's change is committed without the lines it added that only ignore an
  engine's own files (``.aider*``, ``/.aider.chat.history.md``); a change that is nothing
  else is left out, so a ticket whose work is in ``.gitignore`` keeps its own lines.

What the workspace committed and left out comes back to the orchestrator as one line
(``summary_line``) that the commit step prints last; ``read_summary`` takes it only from
the output the commit step wrote, after the engine had ended (``engine_stage.py``).
"""

from __future__ import annotations

import difflib
import json
import posixpath
from dataclasses import dataclass

# Where a name starting so is the engine's own (a new path only: see above). aider's
# defaults: .aider.chat.history.md, .aider.input.history, .aider.llm.history,
# .aider.tags.cache.v4/. Claude Code and Codex keep theirs under the (private) home.
ENGINE_OWN_PREFIXES = (".aider",)
IGNORE_FILES = (".gitignore",)
SUMMARY_MARKER = "::engine-workspace-summary::"
# The summary names at most this many paths of each list (the counts say all).
LISTED_PATHS = 50


def engine_own(path: str, *, tracked: bool) -> bool:
    """Whether ``path`` (as git names it, ``/``-separated) is the engine's own file:
    new (``tracked`` False: the base commit does not hold it) and named as an engine
    names its own files."""
    if tracked:
        return False
    return any(part.startswith(ENGINE_OWN_PREFIXES) for part in path.split("/"))


def left_out_name(path: str) -> str:
    """``path`` as the record lists it: a file inside an engine's own directory is the
    directory (``.aider.tags.cache.v4/``), so a cache of a thousand files is one entry."""
    parts = path.split("/")
    for depth, part in enumerate(parts[:-1]):
        if part.startswith(ENGINE_OWN_PREFIXES):
            return "/".join(parts[: depth + 1]) + "/"
    return path


def is_ignore_file(path: str) -> bool:
    return posixpath.basename(path) in IGNORE_FILES


def engine_pattern(line: str) -> bool:
    """Whether an ignore file's ``line`` only ignores engine's own files: ``.aider*``,
    ``/.aider.chat.history.md``, ``**/.aider.tags.cache.v4/``."""
    pattern = line.strip()
    if not pattern or pattern.startswith(("#", "!")):
        return False
    pattern = pattern.removeprefix("**/").removeprefix("/").removesuffix("/")
    return "/" not in pattern and pattern.startswith(ENGINE_OWN_PREFIXES)


def kept_ignore_change(before: str | None, after: str) -> str | None:
    """What of an ignore file's change is committed: ``after`` without the lines the
    change added that only ignore engine's own files (``engine_pattern``), or None when
    nothing else is left of the change (the file is then left as ``before`` had it).
    ``before``: its content in the base commit, None when it is new. A final newline the
    engine added along with its lines (aider does, to a file that ended without one) is
    no change of its own."""
    old = (before or "").splitlines(keepends=True)
    new = after.splitlines(keepends=True)
    kept: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        added = new[j1:j2]
        if tag == "equal":
            kept += added
        elif tag in ("insert", "replace"):
            ours = [line for line in added if engine_pattern(line)]
            # Blank lines in a block that was otherwise only the engine's go with it.
            if ours and all(engine_pattern(line) or not line.strip() for line in added):
                continue
            kept += [line for line in added if not engine_pattern(line)]
    result = "".join(kept)
    if result == after:
        return after
    if _same_but_final_newline(result, before or ""):
        return None
    if before is None and not result.strip():
        return None
    return result


def _same_but_final_newline(one: str, other: str) -> bool:
    return one == other or (
        one.rstrip("\n") == other.rstrip("\n") and abs(len(one) - len(other)) <= 1
    )


@dataclass(frozen=True)
class WorkspaceSummary:
    """What the workspace's commit step did: the paths it committed (as git names
    them) and those it left out as the engine's own (an ignore file committed without
    an engine's lines is in both). At most ``LISTED_PATHS`` of each; the counts say
    how many in all."""

    committed: tuple[str, ...]
    left_out: tuple[str, ...]
    committed_count: int
    left_out_count: int


def summarise(committed: list[str], left_out: list[str]) -> WorkspaceSummary:
    return WorkspaceSummary(
        tuple(committed[:LISTED_PATHS]),
        tuple(left_out[:LISTED_PATHS]),
        len(committed),
        len(left_out),
    )


def summary_line(summary: WorkspaceSummary) -> str:
    """One line, whatever the paths hold (JSON escapes a newline in a name)."""
    return SUMMARY_MARKER + json.dumps(
        {
            "committed": list(summary.committed),
            "left_out": list(summary.left_out),
            "committed_count": summary.committed_count,
            "left_out_count": summary.left_out_count,
        },
        ensure_ascii=True,
    )


def read_summary(output: str) -> WorkspaceSummary | None:
    """The last summary line in ``output`` (what the commit step alone wrote), or None
    when there is none or it is not one this module wrote."""
    for line in reversed(output.splitlines()):
        if not line.startswith(SUMMARY_MARKER):
            continue
        try:
            data = json.loads(line[len(SUMMARY_MARKER) :])
        except ValueError:
            return None
        return _summary_of(data)
    return None


def _summary_of(data: object) -> WorkspaceSummary | None:
    if not isinstance(data, dict):
        return None
    committed, left_out = data.get("committed"), data.get("left_out")
    counts = data.get("committed_count"), data.get("left_out_count")
    if not all(
        isinstance(v, list) and all(isinstance(p, str) for p in v) for v in (committed, left_out)
    ):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        return None
    assert isinstance(committed, list) and isinstance(left_out, list)
    return WorkspaceSummary(
        tuple(committed[:LISTED_PATHS]),
        tuple(left_out[:LISTED_PATHS]),
        int(counts[0] or 0),
        int(counts[1] or 0),
    )
