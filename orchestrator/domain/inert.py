"""Text from outside made inert where it lands (issue 40). Pure.

An issue's title and body, a log's lines, a model's summary and a hand-off quoting them
were written by someone we do not trust. Wherever we post such text it is shown, never
obeyed: it closes no issue, pings nobody, renders no image, link or HTML. Each place it
lands has its own grammar, so each has its own function here:

* **GitHub / GitLab Markdown** (pull request descriptions, status comments):
  ``markdown_block`` and ``markdown_inline`` quote the text *as code* — a fenced block
  whose fence is longer than any backtick run inside it, or a code span likewise. Why
  code and not backslash escapes: the forges find mentions (``@team``) and issue
  references (``#12``, ``GH-12``) in the *rendered* text, where an escaped ``\\@team`` is
  ``@team`` again; inside code they find none, and no image, link, autolink or HTML
  renders. Closing keywords get one more step, because GitLab reads them from the raw
  text with a regular expression (its closing pattern), code or not: every closing
  keyword followed by an issue reference, in any of its forms (``#N``, ``owner/repo#N``,
  ``GH-N``, ``JIRA-N``, a URL, GitLab's ``!N`` and ``&N``), gets an ``_`` glued to it
  (``Fixes_ #999``) — no longer the keyword for any parser that looks for a word.
* **Titles and commit subjects** (``forge_line``): one line, no code to hide in, so
  closing keywords are broken as above and ``@name`` becomes ``@ name`` (GitLab notifies
  those mentioned in a merge request's title).
* **Slack** (``slack``): ``&``, ``<`` and ``>`` escaped as Slack documents, so
  ``<!channel>``, ``<!here>``, ``<@U…>`` and ``<https://…|Approve now>`` show as written.
  Its other markup (``*bold*``) only changes how text looks; a bare URL shows itself.
* **Teams** (``teams``): a MessageCard's text is Markdown with some HTML, so ``&``,
  ``<``, ``>`` are HTML entities and ``[``, ``]``, ``\\`` are backslash-escaped: no tag,
  link or image renders (an incoming webhook cannot mention anyone). Emphasis is left
  alone: it changes how text looks, nothing more; a bare URL shows itself.
* **E-mail and the generic webhook** (``plain``): text as text — an e-mail has no HTML
  part; a webhook's JSON carries strings whose rendering is the receiver's to escape (the
  guide says so), with ``<``, ``>`` and ``&`` written as ``\\u003c`` and the like, so even
  a body pasted raw into a page is inert (``json_text``).

All of them first drop control, zero-width, bidi and private-use characters
(``plain``), which can hide text from a reader or split a keyword for one parser and not
another.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Final

_KEEP: Final = frozenset("\n\t")
_BIDI: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

# GitHub's closing keywords, and GitLab's (its default closing pattern adds -ing forms and
# "implement"); case-insensitive, as both read them.
_KEYWORD: Final = (
    r"(?:clos(?:e[sd]?|ing)|fix(?:e[sd]|ing)?|resolv(?:e[sd]?|ing)|implement(?:s|ed|ing)?)"
)
# What may follow a keyword and name an issue: ``#N``, ``!N``, ``&N``; ``owner/repo#N``
# (any depth, GitLab's groups); ``user#N``; ``GH-N`` or a Jira-style ``KEY-N``; a URL;
# GitLab's "issue #N".
_REFERENCE: Final = (
    r"(?:[#!&]\d|[\w.-]+(?:/[\w.-]+)*[#!&]\d|[A-Za-z][A-Za-z0-9_]*-\d|https?://|issues?\s)"
)
# Emphasis around the keyword (``**Fixes** #9``) is looked through: it renders away.
_CLOSING: Final = re.compile(
    rf"(?<!\w)({_KEYWORD})(?=[*_~]*\s*:?[*_~]*\s*{_REFERENCE})", re.IGNORECASE
)
_MENTION: Final = re.compile(r"(?<![\w`])@(?=[\w-])")
# What builds a link or an image in Markdown (``[text](url)``, ``![x](url)``), and the
# escape character itself; emphasis and headings only change how text looks.
_LINK_PUNCTUATION: Final = re.compile(r"([\\\[\]])")


def visible(text: str, keep: frozenset[str] | set[str] = frozenset()) -> str:
    """``text`` without control, format (zero-width, bidi), surrogate or private-use
    characters, except those in ``keep``."""
    return "".join(
        char for char in text
        if char in keep
        or (char not in _BIDI and unicodedata.category(char) not in ("Cc", "Cf", "Cs", "Co"))
    )  # fmt: skip


def plain(text: str) -> str:
    """``text`` without control, format (zero-width, bidi), surrogate or private-use
    characters; newlines (normalised) and tabs kept."""
    return visible(text.replace("\r\n", "\n").replace("\r", "\n"), _KEEP)


def break_closing(text: str) -> str:
    """Every closing keyword that is followed by an issue reference made into another
    word (``Fixes #9`` → ``Fixes_ #9``), so merging closes nothing it names."""
    return _CLOSING.sub(r"\1_", text)


def forge_line(text: str) -> str:
    """One line for a forge's title or a commit's subject: plain, its closing keywords
    broken and its mentions made text (``@team`` → ``@ team``)."""
    line = " ".join(plain(text).split())
    return _MENTION.sub("@ ", break_closing(line))


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def markdown_block(text: str) -> str:
    """``text`` as a fenced code block for GitHub or GitLab: shown as written, nothing in
    it live. The fence is longer than any backtick run inside, so the text cannot close
    it; a backtick fence is not closed by tildes or by indentation."""
    said = break_closing(plain(text)).strip("\n") or "(empty)"
    fence = "`" * max(3, _longest_backtick_run(said) + 1)
    return f"{fence}text\n{said}\n{fence}"


def markdown_inline(text: str) -> str:
    """``text`` as one inline code span (on one line), its delimiters longer than any
    backtick run inside; the spaces inside keep a run at either end off the delimiter."""
    said = break_closing(" ".join(plain(text).split())) or "-"
    ticks = "`" * (_longest_backtick_run(said) + 1)
    return f"{ticks} {said} {ticks}"


def slack(text: str) -> str:
    """``text`` for Slack's mrkdwn: ``&``, ``<``, ``>`` escaped, as Slack asks, so no
    ``<!channel>``, ``<@U…>`` or ``<url|label>`` acts."""
    return plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def teams(text: str) -> str:
    """``text`` for a Teams MessageCard's Markdown: HTML's three characters as entities
    (no tag, no ``<url>`` autolink), the brackets of link and image syntax and the
    backslash escaped (no ``[text](url)``, no ``![x](url)``)."""
    said = plain(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _LINK_PUNCTUATION.sub(r"\\\1", said)


def json_text(value: object) -> str:
    """``value`` as JSON whose text holds no ``<``, ``>`` or ``&`` (each as its ``\\u``
    escape, which decodes to the same string): inert even where a receiver pastes the
    body raw into HTML."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
