"""Hostile text through the neutraliser, per destination (issue 40): every closing
keyword form, mentions, images, links, raw HTML, Slack's control sequences, backtick runs
long enough to close a fence, zero-width and bidi tricks. What comes out shows the text
and acts on nothing: judged by rendering it (``markdown_live``), by the forges' own
closing patterns, and by Slack's escaping rules."""

from __future__ import annotations

import html
import json

import markdown
import pytest

from orchestrator.domain.inert import (
    break_closing,
    forge_line,
    json_text,
    markdown_block,
    markdown_inline,
    plain,
    slack,
    teams,
)

from support.markdown_live import GITHUB_CLOSING, GITLAB_CLOSING, MENTION, what_acts

CLOSING = [
    "Fixes #999",
    "fixes #999",
    "FIXED #1",
    "Closes other/repo#12",
    "close octo/widgets#3",
    "Resolves: GH-4",
    "resolved octo#5",
    "Fix https://github.com/octo/widgets/issues/6",
    "closing https://gitlab.com/grp/cards/-/issues/7",
    "Closes group/sub/project#8",
    "Closes !9",
    "closes &10",
    "Fixing issue #11",
    "Implements JIRA-12",
    "Closes #13, #14 and #15",
    "**Fixes** #16",
    "Fixes:  #17",
    "see-Fixes #22",  # a word boundary is all either forge asks before the keyword
    "(closes #23)",
    "Fi\u200bxes #18",  # a zero-width space: gone, and the keyword with it broken
    "\u202eFixes #19",  # a bidi override
]
HOSTILE = [
    *CLOSING,
    "@team please look",
    "cc @octo-org/security-team",
    "<img src=x onerror=alert(1)>",
    "![x](http://evil.example/pixel.png)",
    "[Approve it here](https://evil.example/approve)",
    "<https://evil.example|Approve now>",
    "<!channel> <!here> <@U024BE7LH>",
    "<script>alert(1)</script><a href=https://evil.example>x</a>",
    "<!-- orchestrator:status ticket=x -->",
    "<https://evil.example/autolink>",
    "```\nFixes #20\n```",
    "````\n``` not the end\n````\nFixes #21 @team ![i](http://e/i.png)",
    "`` ` `` and a lone ` and ``````",
]
ALL = "\n\n".join(HOSTILE)


@pytest.mark.parametrize("text", [*HOSTILE, ALL])
def test_a_markdown_block_shows_the_text_and_nothing_in_it_acts(text: str) -> None:
    block = markdown_block(text)
    assert what_acts(f"Asked:\n\n{block}\n\nAfter.") == []
    # Shown as written (but for the broken keywords and the invisible characters).
    shown = markdown.markdown(block, extensions=["fenced_code"])
    assert html.unescape(shown).count("\n") >= plain(text).count("\n")
    assert "After" not in shown


@pytest.mark.parametrize("text", [*HOSTILE, ALL])
def test_an_inline_code_span_shows_the_text_and_nothing_in_it_acts(text: str) -> None:
    assert what_acts(f"- {markdown_inline(text)}\n- next") == []


@pytest.mark.parametrize("text", CLOSING)
def test_every_closing_keyword_form_is_broken_even_outside_code(text: str) -> None:
    def rendered(said: str) -> str:  # emphasis renders away; GitHub reads what is left
        return said.replace("*", "").replace("~", "")

    broken = rendered(break_closing(plain(text)))
    assert not GITHUB_CLOSING.search(broken) and not GITLAB_CLOSING.search(broken), broken
    before = rendered(plain(text))
    assert GITHUB_CLOSING.search(before) or GITLAB_CLOSING.search(before), (
        "the table's entry is a closing reference to begin with"
    )


def test_words_that_only_look_like_keywords_are_left_alone() -> None:
    said = "the fix is small; prefixes #1 stay; closes the file; see #2"
    assert break_closing(said) == said


@pytest.mark.parametrize("text", [*HOSTILE, "Fix @team: Resolves GH-12\nand\tmore"])
def test_a_forge_line_closes_nothing_and_mentions_nobody(text: str) -> None:
    line = forge_line(text)
    assert "\n" not in line and "\t" not in line
    assert not GITHUB_CLOSING.search(line) and not GITLAB_CLOSING.search(line)
    assert not MENTION.search(line), line
    assert "\u200b" not in line and "\u202e" not in line


def test_a_forge_line_keeps_an_ordinary_title() -> None:
    assert forge_line("deal() hands out one card too few") == "deal() hands out one card too few"
    assert forge_line("mail a@b.org about it") == "mail a@b.org about it"


@pytest.mark.parametrize("text", [*HOSTILE, ALL])
def test_slack_text_has_no_control_sequence_and_reads_back_as_written(text: str) -> None:
    said = slack(text)
    assert "<" not in said and ">" not in said
    assert "&" not in said.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")
    unescaped = said.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    assert unescaped == plain(text)


def test_slacks_own_examples() -> None:
    assert slack("<!channel>") == "&lt;!channel&gt;"
    assert slack("<https://evil|Approve now>") == "&lt;https://evil|Approve now&gt;"
    assert slack("a & b") == "a &amp; b"


@pytest.mark.parametrize("text", [*HOSTILE, ALL])
def test_teams_text_renders_no_link_image_or_tag(text: str) -> None:
    rendered = markdown.markdown(teams(text))
    assert "<a " not in rendered and "<img" not in rendered and "<script" not in rendered
    assert "<!--" not in rendered


def test_plain_drops_what_hides_text_and_keeps_lines() -> None:
    assert plain("a\r\nb\tc\x1b\u202ed\u2067\u200be\ue000") == "a\nb\tcde"


def test_json_text_holds_no_angle_brackets_and_decodes_to_the_same() -> None:
    value = {"text": "<!channel> <img src=x> & more"}
    said = json_text(value)
    assert "<" not in said and ">" not in said and "&" not in said
    assert json.loads(said) == value


def test_a_fence_is_longer_than_any_backtick_run_inside() -> None:
    block = markdown_block("a ````` b")
    assert block.startswith("``````text\n") and block.endswith("\n``````")
    assert markdown_block("") == "```text\n(empty)\n```"
    assert markdown_inline("a `` b") == "``` a `` b ```"
