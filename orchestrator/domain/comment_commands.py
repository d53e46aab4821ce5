"""An issue comment as an answer to a paused run (issue 28): ``/orchestrator approve``
(optionally ``approve N``, naming the verdict) or ``/orchestrator reject <reason>``; or
as a person's word on a playbook entry learned from the issue's ticket (issue 44):
``/orchestrator playbook promote <entry-id>``. Pure.

The command must be the comment's whole first line; nothing else in the comment counts.
A quoted line (``> /orchestrator approve``) or one inside a code block is someone else's
words being shown, never a command: only the first line is read, so both fall out (a
quote or a fence opens with its own marker). A comment with a control or bidirectional
formatting character anywhere is no command at all: what a reviewer sees on the page
must be what is read here. Lengths are bounded before anything is matched.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Final

PREFIX: Final = "/orchestrator"
MAX_COMMENT_CHARS: Final = 20_000  # a longer comment is not read as a command at all
MAX_REASON_CHARS: Final = 500
MAX_VERDICT: Final = 9_999

_APPROVE = re.compile(r"/orchestrator[ \t]+approve(?:[ \t]+(?P<number>[1-9][0-9]{0,3}))?[ \t]*")
_REJECT = re.compile(r"/orchestrator[ \t]+reject[ \t]+(?P<reason>\S.*?)[ \t]*")
# An entry id as ``domain.playbook.ENTRY_ID`` spells it.
_PROMOTE = re.compile(
    r"/orchestrator[ \t]+playbook[ \t]+promote[ \t]+(?P<entry>[a-z0-9][a-z0-9-]{0,63})[ \t]*"
)
# Allowed layout characters; every other Cc/Cf (bidi overrides, zero-width joiners, NUL,
# escape sequences) makes the comment no command.
_LAYOUT: Final = frozenset("\n\r\t")
_HIDDEN: Final = frozenset({"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"})


# The names forges give accounts that are no person (issue 40): GitHub's apps
# (``github-actions[bot]``; no person's login may hold a bracket) and GitLab's project
# and group access tokens' users (``project_{id}_bot_{random}``, ``group_{id}_bot_{random}``,
# ``project_{id}_bot{n}`` before 16.x). A person who picked such a name is refused too.
_BOT_NAMES: Final = {
    "github": re.compile(r".*\[bot\]", re.IGNORECASE | re.DOTALL),
    "gitlab": re.compile(r"(?:project|group)_[0-9]+_bot(?:_[0-9a-z]+|[0-9]*)", re.IGNORECASE),
}


def bot_name(kind: str, name: str) -> bool:
    """Whether ``name`` is, on forge ``kind``, the name of an account no person holds."""
    pattern = _BOT_NAMES.get(kind)
    return pattern is not None and pattern.fullmatch(name) is not None


@dataclass(frozen=True)
class CommentCommand:
    """What a comment asks of the run: ``approved`` or not, the verdict it names (None:
    the one waiting), and a rejection's reason."""

    approved: bool
    verdict: int | None = None
    reason: str | None = None


def hidden_characters(text: str) -> bool:
    """Whether ``text`` holds a control, format, private-use, unassigned or line-separator
    character other than ordinary line layout."""
    return any(unicodedata.category(ch) in _HIDDEN and ch not in _LAYOUT for ch in text)


def parse_command(body: str, *, _max_chars: int = MAX_COMMENT_CHARS) -> CommentCommand | None:
    """The command ``body`` gives, or None when it gives none (see the module docstring)."""
    if not body or len(body) > _max_chars or hidden_characters(body):
        return None
    first = body.split("\n", 1)[0].removesuffix("\r")
    if (approve := _APPROVE.fullmatch(first)) is not None:
        number = approve.group("number")
        return CommentCommand(approved=True, verdict=int(number) if number else None)
    if (reject := _REJECT.fullmatch(first)) is not None:
        reason = reject.group("reason")
        if len(reason) > MAX_REASON_CHARS:
            return None
        return CommentCommand(approved=False, reason=reason)
    return None


def parse_playbook_command(body: str, *, _max_chars: int = MAX_COMMENT_CHARS) -> str | None:
    """The entry id a ``/orchestrator playbook promote <entry-id>`` comment names, or None,
    read by the same rules as an approval (see the module docstring)."""
    if not body or len(body) > _max_chars or hidden_characters(body):
        return None
    first = body.split("\n", 1)[0].removesuffix("\r")
    found = _PROMOTE.fullmatch(first)
    return found.group("entry") if found is not None else None
