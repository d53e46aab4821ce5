"""A small batch through the real pipeline, for the report's tests: real stage processes,
the real driver and recovery, and the model answered by the real Anthropic SDK through an
``httpx2.MockTransport``. Its state dir has a hostile name, and one ticket is hostile all
through (title, log line, the model's summary), so the page's escaping and links are
tested on what a batch really writes.

    T-OK       passes                                       → completed
    T-FLAKY    build fails once; the model says retry       → awaiting-approval (routed to a person)
    HOSTILE-1  build prints markup and fails; the model     → needs-human, with a hand-off
               says abandon-human with markup in its summary
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from orchestrator.cli.commands.batch import batch
from orchestrator.recovery.anthropic_gateway import AnthropicGateway

MODEL = "claude-sonnet-4-6"
HOSTILE_TITLE = "<script>alert(1)</script>"
HOSTILE_LOG = "<img src=x onerror=alert(2)> error: </pre><script>alert(3)</script>"
HOSTILE_SUMMARY = '"><script>alert(4)</script><a href="https://evil.example/">'
# A state dir whose name would break an unescaped attribute or an unquoted URL.
HOSTILE_DIR = "st\"a<t>e&'#?% x"

CONFIG = f"""
state_dir = "state"
[prices."{MODEL}"]
input_per_mtok = 3.0
output_per_mtok = 15.0
[batch]
max_model_calls = 10
[recovery]
max_diag_invocations_per_ticket = 2
max_retries_per_ticket = 2

[[stages]]
name = "clone"
cwd = "run"
command = ["bash", "-c", "git init -q clone"]

[[stages]]
name = "build"
command = ["bash", "{{root}}/build.sh", "{{root}}/counts"]
writable = ["{{root}}/counts"]
"""
# In a file, so a log's command line does not quote the other tickets' branches.
BUILD = f"""
case "$ORCH_TICKET_ID" in
  T-FLAKY) f="$1/flaky-builds"; echo x >> "$f"
           [ "$(wc -l < "$f")" -ge 2 ] || {{ echo "error: flaky build"; exit 1; }} ;;
  HOSTILE-1) echo '{HOSTILE_LOG}'; exit 1 ;;
esac
echo built
"""


def _ticket(directory: Path, ticket_id: str, title: str, origin: Path) -> None:
    (directory / f"{ticket_id}.md").write_text(
        "+++\n"
        f"id = {json.dumps(ticket_id)}\n"
        f"title = {json.dumps(title)}\n"
        'kind = "feature"\n'
        f"repository = {json.dumps(str(origin))}\n"
        'base_branch = "main"\n'
        "+++\n"
        "Do the thing.\n"
    )


def message(text: str, request: httpx2.Request) -> httpx2.Response:
    """A Messages API reply as the API shapes it."""
    return httpx2.Response(
        200,
        json={
            "id": "msg_report_fixture",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1200, "output_tokens": 80},
        },
    )


class FakeApi:
    """Answers the flaky build's diagnosis with retry, any other with abandon-human (markup
    in its summary); counts the requests."""

    def __init__(self) -> None:
        self.requests = 0

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests += 1
        verdict: dict[str, Any]
        if b"flaky build" in request.content:
            verdict = {"action": "retry", "summary": "the build looks flaky; run it again"}
        else:
            verdict = {"action": "abandon-human", "summary": HOSTILE_SUMMARY}
        return message(json.dumps(verdict), request)

    def gateway(self) -> AnthropicGateway:
        return AnthropicGateway(
            model=MODEL,
            api_key="sk-ant-test-report-0123456789",
            timeout_s=10.0,
            max_retries=0,
            http_client=httpx2.Client(transport=httpx2.MockTransport(self)),
        )


@dataclass(frozen=True)
class FixtureBatch:
    root: Path
    config: Path
    state_dir: Path
    tickets: Path
    page: Path
    metrics: Path
    batch_id: str
    exit_code: int
    output: str
    api_requests: int


def run_fixture_batch(root: Path) -> FixtureBatch:
    import git

    origin = root / "origin.git"
    git.Repo.init(origin, bare=True).close()
    tickets = root / "tickets"
    tickets.mkdir(parents=True)
    _ticket(tickets, "T-OK", "A ticket that passes", origin)
    _ticket(tickets, "T-FLAKY", "A flaky build", origin)
    _ticket(tickets, "HOSTILE-1", HOSTILE_TITLE, origin)
    config = root / "config.toml"
    config.write_text(CONFIG)
    (root / "build.sh").write_text(BUILD)
    state_dir = root / HOSTILE_DIR / "state"
    site = root / "site" / "reports"
    site.mkdir(parents=True)
    page = site / "batch.html"
    metrics = root / "textfile" / "orchestrator.prom"
    metrics.parent.mkdir()
    api = FakeApi()
    out = io.StringIO()
    code = batch(
        config, str(state_dir), tickets, jobs=1, as_json=True, worker=False, out=out,
        environ={"PATH": os.environ["PATH"], "HOME": str(root)},
        gateway_factory=api.gateway, published=(page, metrics),
    )  # fmt: skip
    summary = json.loads(out.getvalue().splitlines()[-1])["summary"]
    return FixtureBatch(
        root=root,
        config=config,
        state_dir=state_dir,
        tickets=tickets,
        page=page,
        metrics=metrics,
        batch_id=summary["batch"],
        exit_code=code,
        output=out.getvalue(),
        api_requests=api.requests,
    )
