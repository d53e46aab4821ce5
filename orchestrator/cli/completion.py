"""``orchestrator completion bash|zsh``: a completion script generated from the argparse
parser itself, so a new subcommand or option completes without anyone editing a script.

A small generator rather than a dependency (shtab): the CLI's shapes are few (nested
subcommands, flags, options taking a value, choices), and a file argument is left to the
shell's own file completion. The script uses ``case`` only (no associative arrays), so
it runs in the bash 3.2 macOS ships; zsh runs it through ``bashcompinit``.
"""

from __future__ import annotations

import argparse
from typing import TextIO

_BODY = """\
_orchestrator() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" path="" word i skip=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${COMP_WORDS[i]}"
        if ((skip)); then skip=0; continue; fi
        case "$word" in
            -*=*) ;;
            -*) case " $(_orchestrator_valued "$path") " in *" $word "*) skip=1 ;; esac ;;
            *) case " $(_orchestrator_subs "$path") " in
                   *" $word "*) path="${path:+$path }$word" ;;
               esac ;;
        esac
    done
    ((COMP_CWORD > 0)) && prev="${COMP_WORDS[COMP_CWORD-1]}"
    if ((skip)); then
        local choices
        choices="$(_orchestrator_choices "$path" "$prev")"
        COMPREPLY=()
        [[ -n "$choices" ]] && COMPREPLY=($(compgen -W "$choices" -- "$cur"))
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$(_orchestrator_opts "$path")" -- "$cur"))
    else
        COMPREPLY=($(compgen -W "$(_orchestrator_subs "$path")" -- "$cur"))
    fi
    return 0
}
complete -o default -F _orchestrator orchestrator
"""


def _visible(action: argparse.Action) -> bool:
    return action.help != argparse.SUPPRESS


def _walk(
    parser: argparse.ArgumentParser, path: str, found: dict[str, argparse.ArgumentParser]
) -> None:
    found[path] = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _walk(child, f"{path} {name}".strip(), found)


def _case(function: str, arms: dict[str, str], *, two: bool = False) -> str:
    """A shell function answering with the words of the arm that matches its argument(s)."""
    key = '"$1 $2"' if two else '"$1"'
    lines = [f"{function}() {{", f"    case {key} in"]
    for pattern, words in arms.items():
        if words:
            lines.append(f"        {_quote(pattern)}) echo {_quote(words)} ;;")
    lines += ["    esac", "}"]
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The bash completion script for ``parser`` (its ``prog`` must be ``orchestrator``)."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    _walk(parser, "", parsers)
    subs: dict[str, str] = {}
    opts: dict[str, str] = {}
    valued: dict[str, str] = {}
    choices: dict[str, str] = {}
    for path, each in parsers.items():
        names: list[str] = []
        flags: list[str] = []
        takes: list[str] = []
        for action in each._actions:
            if isinstance(action, argparse._SubParsersAction):
                names += [n for n in action.choices if _visible_choice(action, n)]
            elif action.option_strings and _visible(action):
                flags += action.option_strings
                if action.nargs != 0:
                    takes += action.option_strings
                    if action.choices:
                        for option in action.option_strings:
                            choices[f"{path} {option}"] = " ".join(map(str, action.choices))
        subs[path] = " ".join(names)
        opts[path] = " ".join(flags)
        valued[path] = " ".join(takes)
    return (
        "# orchestrator completion for bash (generated from its argument parser)\n"
        + _case("_orchestrator_subs", subs)
        + _case("_orchestrator_opts", opts)
        + _case("_orchestrator_valued", valued)
        + _case("_orchestrator_choices", choices, two=True)
        + _BODY
    )


def _visible_choice(action: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> bool:
    """A subcommand listed in help (argparse keeps hidden ones out of ``_choices_actions``)."""
    listed = {choice.dest for choice in action._choices_actions}
    return name in listed or not listed


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """zsh: the bash script, run by zsh's own bash-compatibility layer."""
    return "#compdef orchestrator\nautoload -U +X bashcompinit && bashcompinit\n" + bash_script(
        parser
    )


def completion(shell: str, parser: argparse.ArgumentParser, out: TextIO) -> int:
    out.write(bash_script(parser) if shell == "bash" else zsh_script(parser))
    return 0
