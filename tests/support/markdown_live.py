"""What in a piece of Markdown would act on a forge (issue 40): rendered by
Python-Markdown (fenced code on), everything outside ``<code>``/``<pre>`` is live — a
tag other than plain structure, a mention, an issue reference after a closing keyword —
and the raw text is also read the way GitLab reads closing keywords (a regular
expression over the text, code or not)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import markdown

# GitHub's keywords and reference forms (docs: "Linking a pull request to an issue").
GITHUB_CLOSING = re.compile(
    r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b\s*:?\s+"
    r"(?:#\d+|[\w.-]+/[\w.-]+#\d+|[\w.-]+#\d+|GH-\d+|https?://\S+/(?:issues|pull)/\d+)"
)
# GitLab's default closing pattern (docs: "Default closing pattern"), its issue_ref
# approximated: a local or cross-project reference (#, !, &), a URL, or a Jira-style key.
GITLAB_CLOSING = re.compile(
    r"\b(?:[Cc]los(?:e[sd]?|ing)|\b[Ff]ix(?:e[sd]|ing)?|\b[Rr]esolv(?:e[sd]?|ing)|"
    r"\b[Ii]mplement(?:s|ed|ing)?)(?::?) +(?:(?:issues? +)?"
    r"(?:[\w./-]*[#!&]\d+|https?://\S+)|[A-Z][A-Z0-9_]+-\d+)"
)
MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][\w-]*(?:/[\w-]+)?")
# What plain prose renders to; anything else outside code is markup someone else chose.
_PLAIN_TAGS = {"p", "ul", "ol", "li", "hr", "strong", "em", "br", "h1", "h2", "h3", "code", "pre"}


class _Walk(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth_in_code = 0
        self.live_text: list[str] = []
        self.live_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("code", "pre"):
            self.depth_in_code += 1
        elif not self.depth_in_code and tag not in _PLAIN_TAGS:
            self.live_tags.append(tag)
        elif self.depth_in_code:
            self.live_tags.append(f"{tag} (inside code: the renderer let it through)")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("code", "pre"):
            self.depth_in_code -= 1

    def handle_data(self, data: str) -> None:
        if not self.depth_in_code:
            self.live_text.append(data)

    def handle_comment(self, data: str) -> None:
        if not self.depth_in_code:
            self.live_tags.append("<!-- -->")


def what_acts(text: str, *, ours: tuple[str, ...] = ()) -> list[str]:
    """Everything in the Markdown ``text`` that would act on GitHub or GitLab, the lines
    in ``ours`` (the orchestrator's own: its marker, its ``Fixes #N``) left out."""
    mine = "\n".join(line for line in text.splitlines() if line.strip() not in ours)
    walk = _Walk()
    walk.feed(markdown.markdown(mine, extensions=["fenced_code"]))
    live = "".join(walk.live_text)
    found = [f"tag {tag}" for tag in walk.live_tags]
    found += [f"mention {m}" for m in MENTION.findall(live)]
    found += [f"link {u}" for u in re.findall(r"https?://\S+", live)]
    found += [f"closes (GitHub) {m}" for m in GITHUB_CLOSING.findall(live)]
    found += [f"closes (GitLab, raw) {m}" for m in GITLAB_CLOSING.findall(mine)]
    return found
