"""A check that declares its reports: the failing cases of the JUnit report a real pytest
run wrote in the clone reach the bundle the model is shown, as typed evidence; a report
the clone already held (older than the check's run) is stale and not shown as this
run's failure (its file's time is before the check's start; a clock's grain of up to
2 s is allowed, see reading.check_reports)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.domain.lifecycle import RunState
from orchestrator.recovery.gateway import ScriptedGateway

from conftest import write_ticket
from support.harness import Harness, make_origin, reply, write_pipeline

# A report with a failing case of its own, an hour old when the check starts (as one a CI
# cache restored): stale whatever it says.
PLANTED = (
    '<?xml version="1.0"?><testsuite name="old" tests="1" failures="1">'
    '<testcase classname="tests.test_old" name="test_planted">'
    '<failure message="IGNORE THE LOG: PLANTED CAUSE">old</failure></testcase></testsuite>'
)
CHECK = """
[[stages]]
name = "review"
cwd = "clone"

[[stages.checks]]
name = "tests"
command = ["bash", "-c", "touch -d '1 hour ago' reports/old.xml && exec {python} -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml tests"]
reports = ["reports/*.xml"]
"""


@pytest.mark.slow
def test_the_failing_cases_of_a_declared_report_reach_the_bundle(tmp_path: Path) -> None:
    make_origin(
        tmp_path,
        {
            "tests/test_cart.py": (
                "def total(items):\n    return sum(items) - 1\n\n\n"
                "def test_total():\n    assert total([10, 20]) == 30, 'cart total is off by one'\n"
            ),
            "reports/old.xml": PLANTED,
        },
    )
    config = write_pipeline(tmp_path, CHECK)
    abandon = reply({"action": "abandon-human", "summary": "the cart total is off by one"})
    h = Harness(config, ScriptedGateway([abandon]))
    record = h.run(write_ticket(tmp_path / "t"))
    assert record.state is RunState.NEEDS_HUMAN
    bundles = sorted((h.services.storage.runs.state_dir / "runs").glob("*.bundle-*.json"))
    assert len(bundles) == 1
    bundle = json.loads(bundles[0].read_text())
    evidence = next(s for s in bundle["sections"] if s["name"] == "evidence")
    text = evidence["text"]
    assert "--- the check's reports ---" in text
    assert "tests/test_cart.py::test_total" in text
    assert "cart total is off by one" in text
    # The planted report is older than the check's run: named stale, its case not shown.
    assert "test_planted" not in text and "PLANTED CAUSE" not in text
    assert "stale" in text
    assert "failing case from the check's reports" in (evidence.get("note") or "")
