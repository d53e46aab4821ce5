"""The gateways a decision is handed: charged before the first live call, each reply
journaled, and a resumed decision answered from the journal while it asks the same."""

from __future__ import annotations

from collections import deque
from pathlib import Path

from orchestrator.app.journaled_calls import journaled_factory, request_sha256
from orchestrator.recovery.gateway import ModelGateway, ModelRequest, ScriptedGateway, Unavailable
from orchestrator.storage.call_journal import CallJournals, JournaledReply


def ask(prompt: str) -> ModelRequest:
    return ModelRequest(system="s", prompt=prompt, json_schema={}, max_tokens=256)


class Decision:
    """One decision's gateways over a journal on disk, as ``recover`` builds them."""

    def __init__(self, state: Path, script: list[str]) -> None:
        self.model = ScriptedGateway(list(script))
        self.journals = CallJournals(state)
        self.charges: list[int] = []
        recorded = deque(self.journals.load("R", 1, "D"))
        self.factory = journaled_factory(
            lambda: self.model, recorded, lambda: self.charges.append(1), self.record
        )

    def record(self, reply: JournaledReply) -> None:
        self.journals.append("R", 1, "D", reply)

    def gateway(self) -> ModelGateway:
        built = self.factory()
        assert built is not None and not isinstance(built, Unavailable)
        return built


def test_a_resumed_decision_is_answered_from_the_journal_while_it_asks_the_same(
    tmp_path: Path,
) -> None:
    first = Decision(tmp_path, ["one", "two"])
    gateway = first.gateway()
    assert gateway.complete(ask("a")).text == "one"  # then the process dies
    assert (first.model.calls, first.charges) == (1, [1])

    resumed = Decision(tmp_path, ["two"])
    gateway = resumed.gateway()
    assert gateway.complete(ask("a")).text == "one"  # from the journal
    assert (resumed.model.calls, resumed.charges) == (0, [])
    assert gateway.complete(ask("b")).text == "two"  # live: covered by the first charge
    assert (resumed.model.calls, resumed.charges) == (1, [])
    recorded = resumed.journals.load("R", 1, "D")
    assert [r.request_sha256 for r in recorded] == [request_sha256(ask(p)) for p in "ab"]
    assert resumed.journals.load("R", 1, "another decision") == ()


def test_a_request_that_differs_ends_the_replay_and_is_charged(tmp_path: Path) -> None:
    Decision(tmp_path, ["one"]).gateway().complete(ask("a"))
    resumed = Decision(tmp_path, ["fresh", "again"])
    gateway = resumed.gateway()
    assert gateway.complete(ask("changed")).text == "fresh"
    assert gateway.complete(ask("a")).text == "again"  # order matters: no going back
    assert (resumed.model.calls, resumed.charges) == (2, [1])


def test_the_journal_is_discarded_once_the_decision_is_written(tmp_path: Path) -> None:
    decision = Decision(tmp_path, ["one"])
    decision.gateway().complete(ask("a"))
    assert decision.journals.path("R", 1).is_file()
    decision.journals.discard("R", 1)
    decision.journals.discard("R", 1)  # twice: a crash in between is harmless
    assert decision.journals.load("R", 1, "D") == ()


def test_a_reply_with_no_utf8_form_is_replayed_as_it_came(tmp_path: Path) -> None:
    odd = '{"action": "retry", "summary": "raw \ud800 surrogate"}'
    Decision(tmp_path, [odd]).gateway().complete(ask("a"))
    assert Decision(tmp_path, []).gateway().complete(ask("a")).text == odd
