"""Issue 43, item 5: the guide's first day with issues on GitLab, as written
(docs/guide/sources-and-notifications.md, *A first day with issues*: "for GitLab read
`GITLAB_TOKEN`, `base_url`, a merge request and `Closes #N`"), through the installed
``orchestrator`` command, against the loopback GitLab. The forge lives on its own host and
is named only by the source's ``base_url`` — a self-managed GitLab as the guide describes
it: no ``ORCHESTRATOR_GITLAB_URL`` anywhere — and the guide's GitLab ``open-pr`` is the
forge's own stage, ``open_pr_gitlab``. A labelled issue in a nested group; a dry batch that
comments what will happen; ``DRY_RUN=false``; a batch that opens exactly one merge request
saying ``Closes #1`` and edits the one status note. Nothing here waits: the fake answers at
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
from support.gitlab_fake import PROJECT, TOKEN, FakeGitLab, gitlab_server  # noqa: F401 (fixture "gitlab")
from support.harness import make_origin
from support.leaks import assert_not_leaked

TICKET = "gl-grp-sub-cards-1"
LOGIN = "bot"  # the fake token's account
MARKER = f"<!-- orchestrator:status ticket={TICKET} -->"
PROJECT_FILES = {
    "widgets.py": "def count(items):\n    return len(items) - 1\n",
    "tests/__init__.py": "",
    "tests/test_widgets.py": "import unittest\n\n\nclass T(unittest.TestCase):\n"
    "    def test_ok(self):\n        self.assertTrue(True)\n",
}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_guides_first_day_on_a_self_managed_gitlab(tmp_path: Path, gitlab: FakeGitLab) -> None:
    if not ORCHESTRATOR.is_file():
        pytest.skip(f"no installed orchestrator command at {ORCHESTRATOR}")
    guide = first_day()
    init, env, tickets, dry, real, read = blocks(guide, "bash")
    _github_toml, gitlab_toml = blocks(guide, "toml")
    origin = make_origin(tmp_path, PROJECT_FILES)
    home = tmp_path / "home"
    project = home / "my-tickets"
    project.mkdir(parents=True)
    shell = Shell(project, home)
    issues = gitlab.projects[PROJECT]["issues"]
    merge_requests = gitlab.projects[PROJECT]["merge_requests"]

    # "**1. A project directory**": `mkdir my-tickets && cd my-tickets` is ours already.
    assert commands(init) == ["mkdir my-tickets && cd my-tickets", "orchestrator init"]
    shell.run(commands(init)[1:])

    # "**2. The config.**" The agent as the README's step 2, the `[[sources]]` table
    # ("uncomment the `[[sources]]` table of your forge and fill it in") and the GitLab
    # `open-pr` ("each forge's own stage (`open_pr_gitlab` below ...) serves its own").
    # "A forge on its own host is named by the source alone: ... `base_url =
    # "https://gitlab.example.org"` (a self-managed GitLab)" — here the fake's address;
    # "for any other clone URL, set it": `repository`, here a bare one on disk.
    source = configure(project, gitlab_toml, {
        "project": PROJECT, "base_url": gitlab.base_url, "repository": str(origin),
    })  # fmt: skip
    assert source["token_env"] == "GITLAB_TOKEN" and source["label"] == "orchestrate"
    config = (project / "config.toml").read_text()
    assert "orchestrator.stages.open_pr_gitlab" in config

    # "**3. The environment.** Put the token in it ... and the agent's key, and leave
    # `#DRY_RUN=false` commented for now."
    fill_env(project, {"GITLAB_TOKEN": TOKEN, "ANTHROPIC_API_KEY": AGENT_KEY})
    env_text = (project / "orchestrator.env").read_text()
    assert "\n#DRY_RUN=false\n" in env_text and "ORCHESTRATOR_GITLAB" not in env_text
    assert commands(env) == ["set -a && . ./orchestrator.env && set +a", "orchestrator doctor"]
    _, said = shell.run(commands(env))
    assert "✗" not in said and "! git-identity" not in said, said
    assert gitlab.base_url in said, said  # doctor says which host it asked

    # "**4. Label an issue** `orchestrate` on the forge ..., and see what the next batch
    # would take: `orchestrator tickets`"
    gitlab.add_issue(PROJECT, "count() is one short", ["orchestrate"], "2026-01-01T00:00:00Z",
                     description="count([1, 2]) says 1.")  # fmt: skip
    gitlab.add_issue(PROJECT, "not for the orchestrator", ["question"], "2026-01-01T00:00:01Z")
    assert commands(tickets) == ["orchestrator tickets"]
    _, said = shell.run(commands(env)[:1] + commands(tickets))
    assert re.search(rf"^  run +{TICKET} +count\(\) is one short +\(new\)$", said, re.M), said
    assert "gl-grp-sub-cards-2" not in said

    # "**5. A dry batch.** `DRY_RUN` is still armed, so nothing is pushed."
    assert commands(dry) == ["orchestrator batch"]
    _, said = shell.run(commands(env)[:1] + commands(dry), expect=None)
    # "stops before `open-pr` (`dry_run_block`); the batch says so in one line."
    assert f"DRY_RUN blocked a side-effectful stage of 1 ticket(s) ({TICKET})" in said, said
    assert merge_requests == []
    assert "orch/" not in "".join(ref.name for ref in git.Repo(origin).refs)
    # "The issue gets one status comment: it was stopped by `DRY_RUN` before `open-pr`,
    # and the first batch run with `DRY_RUN=false` goes on from there."
    [status] = [n for n in issues[0]["notes"] if n["author"]["username"] == LOGIN]
    dry_body = status["body"]  # the fake's live note: it changes when edited
    assert dry_body.startswith(MARKER)
    assert "DRY_RUN" in dry_body and "`open-pr`" in dry_body, dry_body
    assert "DRY_RUN=false" in dry_body, dry_body
    assert issues[1]["notes"] == []
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
    assert ledger_rows(project) == []  # green all the way: no decision was made

    # "**6. Let it act.** Uncomment `DRY_RUN=false` in `orchestrator.env`, read it again
    # and run the next batch"
    arm_for_real(project)
    assert commands(real) == [*commands(env)[:1], "orchestrator batch"]
    code, said = shell.run(commands(real), expect=None)
    assert code == 0, said
    # "It resumes the blocked run at `open-pr`, without cloning or implementing again: it
    # pushes `orch/gh-owner-name-7` and opens one pull request whose description ends with
    # `Fixes #7`" — for GitLab, a merge request and `Closes #N`.
    assert len(merge_requests) == 1, said
    [merge_request] = merge_requests
    assert merge_request["source_branch"] == f"orch/{TICKET}"
    assert merge_request["target_branch"] == "main"
    assert merge_request["description"].rstrip().endswith("Closes #1"), merge_request
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
    [edited] = [n for n in issues[0]["notes"] if n["author"]["username"] == LOGIN]
    assert edited["id"] == status["id"] and edited["body"].startswith(MARKER)
    assert "**Completed**" in edited["body"] and merge_request["web_url"] in edited["body"]
    assert dry_body in edited["history"], edited["history"]  # the dry one, edited
    posts = [r for r in gitlab.requests if r.method == "POST" and r.path.endswith("/notes")]
    assert len(posts) == 1, [r.path for r in posts]
    creates = [
        r for r in gitlab.requests if r.method == "POST" and r.path.endswith("/merge_requests")
    ]
    assert len(creates) == 1, [r.path for r in gitlab.requests]  # asked once, answered at once
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
    assert len(merge_requests) == 1 and len(ledger_rows(project)) == 1
    assert [n["id"] for n in issues[0]["notes"]] == [status["id"]]
    # The token and the key are in orchestrator.env only: not in anything said, stored or posted.
    assert_not_leaked([TOKEN, AGENT_KEY], "\n".join(shell.transcript) + json.dumps(gitlab.projects),
                      project / ".state")  # fmt: skip


def runs(shell: Shell, env: str) -> list[dict[str, Any]]:
    """``orchestrator runs --json``, after reading the environment as step 3 does."""
    _, said = shell.run([commands(env)[0], "orchestrator runs --json 2>/dev/null"])
    return [json.loads(line) for line in said.splitlines() if line.startswith("{")]
