"""Issue 43, item 5: the guide's first day with issues on GitHub, as written
(docs/guide/sources-and-notifications.md, *A first day with issues*), through the installed
``orchestrator`` command, against the loopback GitHub. The forge lives on its own host and
is named only by the source's ``api_url`` — GitHub Enterprise as the guide describes it:
no ``ORCHESTRATOR_GITHUB_API_URL`` anywhere. A labelled issue; a dry batch that comments
what will happen; ``DRY_RUN=false``; a batch that opens exactly one pull request saying
``Fixes #7`` and edits the one status comment. Nothing here waits: the fake answers at
once, and a request it was not asked for (a retry after a back-off) would show in its
record, which the test counts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import git
import pytest

from support.first_day import (
    AGENT_KEY,
    AUTHOR,
    ORCHESTRATOR,
    Shell,
    arm_for_real,
    blocks,
    commands,
    configure,
    fill_env,
    first_day,
    ledger_rows,
    run_record,
)
from support.github_fake import LOGIN, TOKEN, serve_github
from support.harness import make_origin
from support.leaks import assert_not_leaked

REPO = "octo/widgets"
TICKET = "gh-octo-widgets-7"
MARKER = f"<!-- orchestrator:status ticket={TICKET} -->"
PROJECT_FILES = {
    "widgets.py": "def count(items):\n    return len(items) - 1\n",
    "tests/__init__.py": "",
    "tests/test_widgets.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
    "    def test_ok(self):\n        self.assertTrue(True)\n",
}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_guides_first_day_on_a_self_hosted_github(tmp_path: Path) -> None:
    if not ORCHESTRATOR.is_file():
        pytest.skip(f"no installed orchestrator command at {ORCHESTRATOR}")
    guide = first_day()
    init, env, tickets, dry, real, read = blocks(guide, "bash")
    github_toml, _gitlab_toml = blocks(guide, "toml")
    origin = make_origin(tmp_path, PROJECT_FILES)
    home = tmp_path / "home"
    project = home / "my-tickets"
    project.mkdir(parents=True)
    shell = Shell(project, home)

    with serve_github() as github:
        # "**1. A project directory**": `mkdir my-tickets && cd my-tickets` is ours already.
        assert commands(init) == ["mkdir my-tickets && cd my-tickets", "orchestrator init"]
        shell.run(commands(init)[1:])

        # "**2. The config.**" The agent as the README's step 2, the `[[sources]]` table
        # ("uncomment the `[[sources]]` table of your forge and fill it in") and the
        # `open-pr` stage. "A forge on its own host is named by the source alone: `api_url
        # = "https://ghe.example.org/api/v3"`" — here the fake's address; "on GitHub
        # Enterprise, or for any other clone URL, set it": `repository`, here a bare one.
        source = configure(project, github_toml, {
            "repo": REPO, "api_url": github.url, "repository": str(origin),
        })  # fmt: skip
        assert source["token_env"] == "GITHUB_TOKEN" and source["label"] == "orchestrate"

        # "**3. The environment.** Put the token in it (`GITHUB_TOKEN=…`) and the agent's
        # key, and leave `#DRY_RUN=false` commented for now."
        fill_env(project, {"GITHUB_TOKEN": TOKEN, "ANTHROPIC_API_KEY": AGENT_KEY})
        env_text = (project / "orchestrator.env").read_text()
        assert "\n#DRY_RUN=false\n" in env_text and "ORCHESTRATOR_GITHUB" not in env_text
        assert commands(env) == [
            "set -a && . ./orchestrator.env && set +a",
            "orchestrator doctor",
        ]
        _, said = shell.run(commands(env))
        assert "✗" not in said and "! git-identity" not in said, said
        assert github.url in said, said  # doctor says which host it asked

        # "**4. Label an issue** `orchestrate` on the forge ..., and see what the next batch
        # would take: `orchestrator tickets`"
        github.add_issue(REPO, 7, "count() is one short", "count([1, 2]) says 1.",
                         ("orchestrate",))  # fmt: skip
        github.add_issue(REPO, 8, "not for the orchestrator", "", ("question",))
        assert commands(tickets) == ["orchestrator tickets"]
        _, said = shell.run(commands(env)[:1] + commands(tickets))
        assert re.search(rf"^  run +{TICKET} +count\(\) is one short +\(new\)$", said, re.M), said
        assert "gh-octo-widgets-8" not in said

        # "**5. A dry batch.** `DRY_RUN` is still armed, so nothing is pushed."
        assert commands(dry) == ["orchestrator batch"]
        _, said = shell.run(commands(env)[:1] + commands(dry), expect=None)
        # "stops before `open-pr` (`dry_run_block`); the batch says so in one line."
        assert f"DRY_RUN blocked a side-effectful stage of 1 ticket(s) ({TICKET})" in said, said
        assert github.pulls.get(REPO, []) == []
        assert "orch/" not in "".join(ref.name for ref in git.Repo(origin).refs)
        # "The issue gets one status comment: it was stopped by `DRY_RUN` before `open-pr`,
        # and the first batch run with `DRY_RUN=false` goes on from there."
        [status] = [c for c in github.comments_on(REPO, 7) if c["user"]["login"] == LOGIN]
        dry_body = status["body"]  # the fake's live comment: it changes when edited
        assert dry_body.startswith(MARKER)
        assert "DRY_RUN" in status["body"] and "`open-pr`" in status["body"], status["body"]
        assert "DRY_RUN=false" in status["body"], status["body"]
        assert github.comments_on(REPO, 8) == []
        # "`orchestrator tickets` now lists it `run gh-owner-name-7 <title> (stopped by DRY_RUN
        # at 'open-pr' (RUN): the first batch with DRY_RUN=false goes on from there)`"
        _, said = shell.run(commands(env)[:1] + commands(tickets))
        assert re.search(
            rf"^  run +{TICKET} .*\(stopped by DRY_RUN at 'open-pr' \({TICKET}-\S+\): the first "
            r"batch with DRY_RUN=false goes on from there\)$", said, re.M), said  # fmt: skip
        [blocked] = runs(shell, env)
        blocked_record = run_record(project, blocked["run_id"])
        assert blocked_record["halt"]["reason"] == "dry_run_block", blocked_record
        assert blocked_record["halt"]["stage"] == "open-pr"
        assert [a["stage"] for a in blocked_record["attempts"]] == ["clone", "implement", "review"]
        dry_rows = ledger_rows(project)
        assert dry_rows == [], dry_rows  # green all the way: no decision was made

        # "**6. Let it act.** Uncomment `DRY_RUN=false` in `orchestrator.env`, read it
        # again and run the next batch"
        arm_for_real(project)
        assert commands(real) == [*commands(env)[:1], "orchestrator batch"]
        code, said = shell.run(commands(real), expect=None)
        assert code == 0, said
        # "It resumes the blocked run at `open-pr`, without cloning or implementing again:
        # it pushes `orch/gh-owner-name-7` and opens one pull request whose description
        # ends with `Fixes #7`"
        pulls = github.pulls.get(REPO, [])
        assert len(pulls) == 1, said
        [pull] = pulls
        assert pull["head"]["ref"] == f"orch/{TICKET}" and pull["base"]["ref"] == "main"
        assert pull["body"].rstrip().endswith("Fixes #7"), pull["body"]
        pushed = git.Repo(origin).commit(f"orch/{TICKET}")
        assert "CHANGED_BY_CLAUDE.txt" in pushed.tree  # the (fake) agent's work
        assert (pushed.author.name, pushed.author.email) == AUTHOR
        [done] = runs(shell, env)
        assert done["run_id"] == blocked["run_id"] and done["state"] == "completed", done
        record = run_record(project, done["run_id"])
        assert [a["stage"] for a in record["attempts"]] == [
            "clone", "implement", "review", "open-pr"]  # fmt: skip
        assert [r["by"] for r in record["resumes"]] == ["batch"], record["resumes"]
        # "The same status comment is edited to `Completed` with the pull request's link;
        # there is still one."
        [edited] = [c for c in github.comments_on(REPO, 7) if c["user"]["login"] == LOGIN]
        assert edited["id"] == status["id"] and edited["body"].startswith(MARKER)
        assert "**Completed**" in edited["body"] and pull["html_url"] in edited["body"]
        assert dry_body in edited["history"], edited["history"]  # the dry one, edited
        posts = [r for r in github.requests if r.method == "POST" and r.path.endswith("/comments")]
        assert len(posts) == 1, [r.path for r in posts]
        creates = [r for r in github.requests if r.method == "POST" and r.path.endswith("/pulls")]
        assert len(creates) == 1, [r.path for r in github.requests]  # asked once, answered at once
        # "(the ledger records the resume, by `batch`)" (batches-and-cron.md)
        rows = ledger_rows(project)
        assert len(rows) == 1 and TICKET in json.dumps(rows), rows
        # "**7. Read what happened.**"
        assert commands(read) == ["orchestrator runs", "orchestrator show gh-owner-name-7"]
        ours = [line.replace("gh-owner-name-7", TICKET) for line in commands(read)]
        _, said = shell.run([commands(env)[0], *ours])
        assert re.search(rf"^{done['run_id']} +{TICKET} +completed +open-pr ", said, re.M), said
        # "its stages, the resume, the pull request"
        assert "open-pr=completed" in said and "by batch from needs-human (dry_run_block)" in said
        assert re.search(r"^pr +\S+/pull-request\.json$", said, re.M), said

        # "A later batch leaves the ticket alone (it counts `0 ticket(s)`; ...)"
        _, said = shell.run(commands(real), expect=None)
        assert "0 ticket(s): no tickets" in said, said
        assert len(github.pulls[REPO]) == 1 and len(ledger_rows(project)) == 1
        assert [c["id"] for c in github.comments_on(REPO, 7)] == [status["id"]]
        # The token and the key are in orchestrator.env only: not in anything said, stored or posted.
        assert_not_leaked([TOKEN, AGENT_KEY], "\n".join(shell.transcript) + json.dumps([github.pulls, github.comments]),
                          project / ".state")  # fmt: skip


def runs(shell: Shell, env: str) -> list[dict[str, Any]]:
    """``orchestrator runs --json``, after reading the environment as step 3 does."""
    _, said = shell.run([commands(env)[0], "orchestrator runs --json 2>/dev/null"])
    return [json.loads(line) for line in said.splitlines() if line.startswith("{")]
