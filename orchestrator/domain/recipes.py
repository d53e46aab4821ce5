"""Mechanical-fix recipes: from the model's command strings to argv lists we are willing
to run — or a refusal, decided before anything runs.

A recipe command is refused when it
  * contains shell syntax (``; | & < > ( )``, backticks, ``$(``, ``${``, newlines): we
    never run a shell, so a command that needs one is not a command we understand;
  * starts with an executable that is not a bare name on the allow-list (default ``git``);
  * names a path outside the clone (absolute, ``..``, ``git -C`` elsewhere, ``--git-dir=``…);
  * tells git to write a file (``--output=``, ``-o``, ``--output-directory``,
    ``bundle create <file>``…) anywhere but inside the clone's work tree — symbolic links
    followed, and never under a ``.git``;
  * for git: uses a subcommand outside a small local-history set, or an option that runs
    programs or changes git's configuration (``-c``, ``--exec-path``, ``--upload-pack``…);
  * would be rewritten by the output guardrail, or already was (``[REDACTED]``…): see
    ``orchestrator.redaction.personal.rewrite_refusal``.
``<clone>`` in a command stands for the run's clone directory.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

CLONE_PLACEHOLDER = "<clone>"
_CLONE_MARK = "\x00"
_FORBIDDEN_TEXT = ("`", "$(", "${", "\n", "\r", "\x00")
_OPERATOR_CHARS = set(";&|<>()")
GIT_SUBCOMMANDS = frozenset(
    {
        "add", "am", "apply", "checkout", "cherry-pick", "commit", "diff", "log", "mv",
        "reset", "restore", "revert", "rm", "show", "stash", "status", "switch",
    }
)  # fmt: skip
# Options that execute programs, read config from elsewhere, or relocate the repository.
_GIT_REFUSED_OPTIONS = (
    "-c", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace",
    "--upload-pack", "--receive-pack", "--exec", "--template", "--super-prefix",
    "--ext-diff", "--textconv", "--strategy", "--open-files-in-pager", "--run",
)  # fmt: skip
_MESSAGE_OPTIONS = frozenset({"-m", "--message"})
# Options whose value is a path git writes to (or writes under). Generous on purpose: a
# path outside the clone, or inside any ``.git``, is where git's instructions live.
_WRITTEN_PATH_OPTIONS = frozenset(
    {"--output", "-o", "--output-directory", "--directory", "--prefix"}
)
# ``git bundle create <file>``: the file is a plain argument.
_WRITTEN_PATH_ARGUMENTS = {"bundle": "create"}


def split_arguments(command: str) -> list[str]:
    """A recipe command as the arguments it runs with, ``<clone>`` still in them: split
    before the clone's path is put in, so a path holding a space or a quote stays one
    argument. Shell operators come out as arguments of their own. Raises ValueError for
    a command that cannot be split (an open quote, a NUL)."""
    # Meanwhile the placeholder is a NUL, which no command we split holds and which is no
    # shell operator ('<' in the placeholder would read as one).
    if _CLONE_MARK in command:
        raise ValueError("a NUL byte is in the command")
    lexer = shlex.shlex(command.replace(CLONE_PLACEHOLDER, _CLONE_MARK), posix=True,
                        punctuation_chars=True)  # fmt: skip
    lexer.whitespace_split = True
    return [token.replace(_CLONE_MARK, CLONE_PLACEHOLDER) for token in lexer]


def _split(command: str, clone: Path) -> tuple[list[str] | None, str | None]:
    for bad in _FORBIDDEN_TEXT:
        if bad in command:
            return None, f"shell syntax {bad!r} is not allowed (commands run without a shell)"
    try:
        tokens = split_arguments(command)
    except ValueError as exc:
        return None, f"cannot be split into arguments: {exc}"
    for token in tokens:
        if token and set(token) <= _OPERATOR_CHARS:
            return None, f"shell operator {token!r} is not allowed (commands run without a shell)"
    if not tokens:
        return None, "is empty"
    return [token.replace(CLONE_PLACEHOLDER, str(clone)) for token in tokens], None


def _inside(path_text: str, clone: Path) -> bool:
    candidate = Path(path_text)
    resolved = (candidate if candidate.is_absolute() else clone / candidate).resolve()
    return resolved == clone or resolved.is_relative_to(clone)


def _path_like(token: str) -> str | None:
    """The path a token names, if it plausibly names one (``--opt=/x`` → ``/x``)."""
    value = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
    if value.startswith(("/", "~")) or value == ".." or value.startswith("../") or "/../" in value:
        return value
    return None


def _in_git_dir(path_text: str, base: Path) -> bool:
    candidate = Path(path_text)
    resolved = (candidate if candidate.is_absolute() else base / candidate).resolve()
    return any(part.lower() == ".git" for part in (*candidate.parts, *resolved.parts))


def _written_paths(arguments: list[str], subcommand: str) -> list[str]:
    """The paths the arguments after ``subcommand`` tell git to write."""
    found: list[str] = []
    for index, token in enumerate(arguments):
        following = arguments[index + 1] if index + 1 < len(arguments) else None
        name, has_value, value = token.partition("=")
        if name in _WRITTEN_PATH_OPTIONS and token.startswith("--") and has_value:
            found.append(value)
        elif token in _WRITTEN_PATH_OPTIONS and following is not None:
            found.append(following)
        elif token.startswith("-o") and not token.startswith("--") and len(token) > 2:
            found.append(token[2:])
    verb = _WRITTEN_PATH_ARGUMENTS.get(subcommand)
    if verb in arguments:
        rest = [a for a in arguments[arguments.index(verb) + 1 :] if not a.startswith("-")]
        found.extend(rest[:1])
    return found


def _git_errors(argv: list[str], clone: Path) -> list[str]:
    errors: list[str] = []
    i, subcommand, base = 1, None, clone
    while i < len(argv):
        token = argv[i]
        if token == "-C":
            if i + 1 >= len(argv):
                return ["git -C needs a directory"]
            if not _inside(argv[i + 1], clone):
                errors.append(f"git -C {argv[i + 1]!r} points outside the clone")
            elif _in_git_dir(argv[i + 1], base):
                errors.append(f"git -C {argv[i + 1]!r} points into .git")
            else:
                target = Path(argv[i + 1])
                base = (target if target.is_absolute() else base / target).resolve()
            i += 2
            continue
        if token.startswith("-"):
            name = token.split("=", 1)[0]
            if name in _GIT_REFUSED_OPTIONS:
                errors.append(f"git option {name!r} is not allowed in a recipe")
            # These take their value as the next argument; it is not the subcommand.
            i += (
                2
                if token in ("-c", "--config-env", "--git-dir", "--work-tree", "--namespace")
                else 1
            )
            continue
        subcommand = token
        break
    if subcommand is None:
        errors.append("git without a subcommand")
    elif subcommand not in GIT_SUBCOMMANDS:
        errors.append(f"git {subcommand!r} is not an allowed recipe subcommand")
    for token in argv[i + 1 :]:
        name = token.split("=", 1)[0]
        if token.startswith("-") and name in _GIT_REFUSED_OPTIONS:
            errors.append(f"git option {name!r} is not allowed in a recipe")
    for path in _written_paths(argv[i + 1 :], subcommand or ""):
        if not _inside(str(base / path), clone):
            errors.append(f"git would write {path!r}, outside the clone")
        elif _in_git_dir(path, base):
            errors.append(f"git would write {path!r}, inside .git")
    return errors


def plan_recipe(
    commands: Sequence[str], *, clone_dir: Path, allowlist: Sequence[str]
) -> tuple[list[tuple[str, ...]], list[str]]:
    """Turn recipe strings into argv tuples. Returns (argvs, errors); errors are
    ``[i]: reason`` so they read as ``repair_plan.commands[i]: reason``. Any error means
    nothing of the recipe runs."""
    # Here, not at the top: the scrubber's patterns take 40 ms to load, and the registry
    # (which the CLI's parser reads) imports this module.
    from orchestrator.redaction import rewrite_refusal

    clone = clone_dir.resolve()
    argvs: list[tuple[str, ...]] = []
    errors: list[str] = []
    for index, command in enumerate(commands):
        refusal = rewrite_refusal(command)
        if refusal is not None:
            errors.append(f"[{index}]: {refusal}")
            continue
        argv, error = _split(command, clone)
        if argv is None:
            errors.append(f"[{index}]: {error}")
            continue
        program = argv[0]
        problems: list[str] = []
        if "/" in program or program not in allowlist:
            problems.append(
                f"executable {program!r} is not on the recipe allow-list {list(allowlist)}"
            )
        previous = ""
        for token in argv[1:]:
            path = None if previous in _MESSAGE_OPTIONS else _path_like(token)
            if path is not None and not _inside(path, clone):
                problems.append(f"path {path!r} is outside the clone")
            previous = token
        if program == "git" and not problems:
            problems.extend(_git_errors(argv, clone))
        errors.extend(f"[{index}]: {p}" for p in problems)
        argvs.append(tuple(argv))
    return (argvs, errors) if not errors else ([], errors)
