"""A check's own reports, read for their failing cases: JUnit XML, SARIF and TAP as real
tools write them, and what a hostile clone can put where a report should be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.reading.check_reports import (
    ReportCase,
    ReportReading,
    read_reports,
    render_reports,
)

from conftest import ROOT, examples, subprocess_env
from support.hostile_json import json_values, nested

MiB = 1 << 20


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    path = tmp_path / "clone"
    path.mkdir()
    return path


def write(clone: Path, rel: str, content: str | bytes) -> Path:
    path = clone / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


def case(**fields: Any) -> ReportCase:
    values: dict[str, Any] = {
        "format": "junit",
        "report": "junit.xml",
        "kind": "failure",
        "message": "",
        "location": None,
        "trace": "",
    }
    return ReportCase(**(values | fields))


# --------------------------------------------------------------------------- JUnit

FAILING_TESTS = """\
import pytest


class TestCart:
    def test_total(self):
        assert 1 + 1 == 3, "math is broken"


def helper():
    raise ValueError("bad value")


def test_helper():
    helper()


@pytest.fixture
def broken():
    raise RuntimeError("fixture boom")


def test_uses_fixture(broken):
    pass


@pytest.mark.skip(reason="later")
def test_skipped():
    pass


def test_passes():
    pass
"""


@pytest.mark.slow
def test_a_real_pytest_report_gives_each_failing_case_with_its_place(clone: Path) -> None:
    write(clone, "tests/test_cart.py", FAILING_TESTS)
    started = time.time()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml", "tests"],
        cwd=clone, env=subprocess_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr

    reading = read_reports(clone, ["junit.xml"], not_before=started)

    assert reading.reports_read == ("junit.xml",)
    assert reading.notes == ()
    assert reading.failing == 3  # the skipped and the passing test are not failures
    assert [(c.name, c.kind, c.location) for c in reading.cases] == [
        ("tests/test_cart.py::TestCart::test_total", "failure", "tests/test_cart.py:6"),
        ("tests/test_cart.py::test_helper", "failure", "tests/test_cart.py:10"),
        ("tests/test_cart.py::test_uses_fixture", "error", "tests/test_cart.py:19"),
    ]
    assert [c.message for c in reading.cases] == [
        "AssertionError: math is broken assert (1 + 1) == 3",
        "ValueError: bad value",
        'failed on setup with "RuntimeError: fixture boom"',
    ]
    total = reading.cases[0]
    assert total.format == "junit" and total.report == "junit.xml"
    assert "E       AssertionError: math is broken" in total.trace.split("\n")
    assert total.trace.endswith("tests/test_cart.py:6: AssertionError")


SUREFIRE = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report-3.0.xsd" version="3.0" name="com.example.shop.CartTest" time="0.052" tests="5" errors="1" skipped="1" failures="1">
  <properties>
    <property name="java.version" value="17.0.9"/>
    <property name="surefire.test.class.path" value="/build/target/test-classes:/build/target/classes"/>
  </properties>
  <testcase name="emptyCartIsFree" classname="com.example.shop.CartTest" time="0.001"/>
  <testcase name="totalAddsPrices" classname="com.example.shop.CartTest" time="0.012">
    <failure message="expected: &lt;30&gt; but was: &lt;20&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <30> but was: <20>
\tat org.junit.jupiter.api.AssertionFailureBuilder.build(AssertionFailureBuilder.java:151)
\tat org.junit.jupiter.api.AssertionFailureBuilder.buildAndThrow(AssertionFailureBuilder.java:132)
\tat org.junit.jupiter.api.AssertEquals.failNotEqual(AssertEquals.java:197)
\tat org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:560)
\tat com.example.shop.CartTest.totalAddsPrices(CartTest.java:21)
\tat java.base/java.lang.reflect.Method.invoke(Method.java:568)
]]></failure>
    <system-out><![CDATA[cart: 2 items
]]></system-out>
  </testcase>
  <testcase name="discountNeedsCode" classname="com.example.shop.CartTest" time="0.003">
    <error message="Cannot invoke &quot;com.example.shop.Code.value()&quot; because &quot;code&quot; is null" type="java.lang.NullPointerException"><![CDATA[java.lang.NullPointerException: Cannot invoke "com.example.shop.Code.value()" because "code" is null
\tat com.example.shop.Cart.discount(Cart.java:44)
\tat com.example.shop.CartTest.discountNeedsCode(CartTest.java:30)
]]></error>
  </testcase>
  <testcase name="checkoutIsQuick" classname="com.example.shop.CartTest" time="0.004">
    <flakyFailure message="timed out" type="java.util.concurrent.TimeoutException"><![CDATA[java.util.concurrent.TimeoutException: timed out
]]></flakyFailure>
  </testcase>
  <testcase name="taxIsApplied" classname="com.example.shop.CartTest" time="0">
    <skipped message="not yet"/>
  </testcase>
</testsuite>
"""


def test_surefire_failures_and_errors_at_the_projects_own_frame(clone: Path) -> None:
    write(clone, "target/surefire-reports/TEST-com.example.shop.CartTest.xml", SUREFIRE)

    reading = read_reports(clone, ["target/surefire-reports/TEST-*.xml"])

    report = "target/surefire-reports/TEST-com.example.shop.CartTest.xml"
    assert reading.reports_read == (report,)
    # A flaky failure passed on a rerun; a skipped case did not run: neither failed.
    assert reading.failing == 2
    assert reading.cases == (
        case(
            report=report,
            name="com.example.shop.CartTest.totalAddsPrices",
            message="expected: <30> but was: <20>",
            location="CartTest.java:21",  # past the JUnit frames the assertion threw in
            trace=SUREFIRE.split("<![CDATA[")[1].split("]]>")[0].rstrip(),
        ),
        case(
            report=report,
            name="com.example.shop.CartTest.discountNeedsCode",
            kind="error",
            message='Cannot invoke "com.example.shop.Code.value()" because "code" is null',
            location="Cart.java:44",  # where it broke, in the project's own code
            trace=(
                'java.lang.NullPointerException: Cannot invoke "com.example.shop.Code.value()"'
                ' because "code" is null\n'
                "\tat com.example.shop.Cart.discount(Cart.java:44)\n"
                "\tat com.example.shop.CartTest.discountNeedsCode(CartTest.java:30)"
            ),
        ),
    )


GRADLE = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.example.shop.PriceTest" tests="2" skipped="0" failures="1" errors="0" timestamp="2026-11-30T10:15:02" hostname="runner-7" time="0.031">
  <properties/>
  <testcase name="roundsHalfUp()" classname="com.example.shop.PriceTest" time="0.021">
    <failure message="org.opentest4j.AssertionFailedError: expected: &lt;10.5&gt; but was: &lt;10.4&gt;" type="org.opentest4j.AssertionFailedError">org.opentest4j.AssertionFailedError: expected: &lt;10.5&gt; but was: &lt;10.4&gt;
\tat app//org.junit.jupiter.api.AssertionFailureBuilder.build(AssertionFailureBuilder.java:151)
\tat app//org.junit.jupiter.api.Assertions.assertEquals(Assertions.java:576)
\tat app//com.example.shop.PriceTest.roundsHalfUp(PriceTest.java:14)
\tat java.base@17.0.9/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
\tat worker.org.gradle.process.internal.worker.GradleWorkerMain.main(GradleWorkerMain.java:74)
</failure>
  </testcase>
  <testcase name="formatsEuros()" classname="com.example.shop.PriceTest" time="0.002"/>
  <system-out><![CDATA[]]></system-out>
  <system-err><![CDATA[]]></system-err>
</testsuite>
"""


def test_gradle_reports_found_by_a_recursive_glob(clone: Path) -> None:
    write(clone, "app/build/test-results/test/TEST-com.example.shop.PriceTest.xml", GRADLE)
    write(clone, "app/build/test-results/test/binary/output.bin", b"\x00\x01")

    reading = read_reports(clone, ["**/build/test-results/**/*.xml"])

    assert reading.reports_read == (
        "app/build/test-results/test/TEST-com.example.shop.PriceTest.xml",
    )
    assert reading.notes == ()
    [only] = reading.cases
    assert only.name == "com.example.shop.PriceTest.roundsHalfUp()"
    assert only.message == ("org.opentest4j.AssertionFailedError: expected: <10.5> but was: <10.4>")
    assert only.location == "PriceTest.java:14"
    assert (
        only.trace.split("\n")[3]
        == "\tat app//com.example.shop.PriceTest.roundsHalfUp(PriceTest.java:14)"
    )


JEST = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="3" failures="1" errors="0" time="1.02">
  <testsuite name="cart" errors="0" failures="1" skipped="1" timestamp="2026-11-30T10:15:02" time="0.61" tests="3">
    <testcase classname="cart adds prices" name="cart adds prices" time="0.004">
      <failure>Error: expect(received).toBe(expected) // Object.is equality

Expected: 30
Received: 20
    at Object.toBe (CLONE/node_modules/expect/build/index.js:99:1)
    at Object.toBe (CLONE/src/cart.test.js:7:30)
    at Promise.then.completed (CLONE/node_modules/jest-circus/build/utils.js:298:28)
    at new Promise (&lt;anonymous&gt;)</failure>
    </testcase>
    <testcase classname="cart empty cart" name="cart empty cart" time="0.001">
    </testcase>
    <testcase classname="cart todo" name="cart todo" time="0">
      <skipped/>
    </testcase>
  </testsuite>
</testsuites>
"""


def test_jest_junit_names_once_and_places_the_failure_inside_the_clone(clone: Path) -> None:
    write(clone, "reports/junit.xml", JEST.replace("CLONE", str(clone)))

    reading = read_reports(clone, ["reports/*.xml"])

    [only] = reading.cases
    assert only.name == "cart adds prices"  # jest-junit repeats the title as classname
    assert only.message == "Error: expect(received).toBe(expected) // Object.is equality"
    assert only.location == "src/cart.test.js:7"  # relative; node_modules passed over
    assert only.trace.split("\n")[:3] == [
        "Error: expect(received).toBe(expected) // Object.is equality",
        "",
        "Expected: 30",
    ]
    assert reading.failing == 1


GO_JUNIT_REPORT = """\
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1">
\t<testsuite name="example.com/shop/cart" tests="3" failures="1" errors="0" id="0" hostname="runner-7" time="0.004" timestamp="2026-11-30T10:15:02Z">
\t\t<properties>
\t\t\t<property name="go.version" value="go1.22.1 linux/amd64"></property>
\t\t</properties>
\t\t<testcase name="TestTotal" classname="example.com/shop/cart" time="0.000">
\t\t\t<failure message="Failed"><![CDATA[    cart_test.go:12: Total() = 20, want 30]]></failure>
\t\t</testcase>
\t\t<testcase name="TestEmpty" classname="example.com/shop/cart" time="0.000"></testcase>
\t\t<testcase name="TestLater" classname="example.com/shop/cart" time="0.000">
\t\t\t<skipped message="Skipped"><![CDATA[    cart_test.go:20: later]]></skipped>
\t\t</testcase>
\t</testsuite>
</testsuites>
"""


def test_go_junit_report_message_comes_from_the_body_not_failed(clone: Path) -> None:
    write(clone, "report.xml", GO_JUNIT_REPORT)

    reading = read_reports(clone, ["report.xml"])

    assert reading.cases == (
        case(
            report="report.xml",
            name="example.com/shop/cart.TestTotal",
            message="cart_test.go:12: Total() = 20, want 30",
            location="cart_test.go:12",
            trace="    cart_test.go:12: Total() = 20, want 30",
        ),
    )


def test_a_report_is_told_by_its_content_not_its_name(clone: Path) -> None:
    write(clone, "out/results.txt", GO_JUNIT_REPORT)
    write(clone, "out/lint.json", SARIF_BY_HAND)
    write(clone, "out/tests.log", CLASSIC_TAP)
    write(clone, "out/checkstyle.xml", '<?xml version="1.0"?><checkstyle version="10"/>')
    write(clone, "out/notes.txt", "nothing to see here\n")

    reading = read_reports(clone, ["out/*"])

    assert reading.reports_read == ("out/lint.json", "out/results.txt", "out/tests.log")
    assert [c.format for c in reading.cases] == ["sarif", "junit", "tap", "tap"]
    assert reading.notes == (
        "out/checkstyle.xml: skipped, XML but not a JUnit report (its root element is <checkstyle>)",
        "out/notes.txt: skipped, not a JUnit, SARIF or TAP report",
    )


def test_a_huge_failure_body_is_kept_bounded_and_its_crash_line_still_found(
    clone: Path,
) -> None:
    body = "x = 1\n" * (3 * MiB) + "tests/test_big.py:812: AssertionError\n"
    write(
        clone,
        "junit.xml",
        '<testsuite><testcase classname="tests.test_big" name="test_it">'
        f'<failure message="assert 0">{body}</failure></testcase></testsuite>',
    )

    [only] = read_reports(clone, ["junit.xml"]).cases

    assert only.name == "tests/test_big.py::test_it"
    assert only.location == "tests/test_big.py:812"  # from the body's end
    assert only.trace == "\n".join(["x = 1"] * 12)


def test_at_most_max_cases_are_kept_and_every_failing_one_is_counted(clone: Path) -> None:
    cases = "".join(
        f'<testcase classname="t" name="c{i}"><failure message="m{i}"/></testcase>'
        for i in range(30)
    )
    write(clone, "junit.xml", f"<testsuites><testsuite>{cases}</testsuite></testsuites>")

    reading = read_reports(clone, ["junit.xml"])
    assert reading.failing == 30
    assert [c.name for c in reading.cases] == [f"t.c{i}" for i in range(20)]

    assert read_reports(clone, ["junit.xml"], max_cases=2).cases[1].message == "m1"
    assert read_reports(clone, ["junit.xml"], max_cases=0).cases == ()
    assert read_reports(clone, ["junit.xml"], max_cases=0).failing == 30


def test_text_is_cleaned_of_controls_and_bidi_overrides(clone: Path) -> None:
    write(
        clone,
        "junit.xml",
        '<testsuite><testcase classname="t" name="evil\u202e\u200bname">'
        '<failure message="line one&#10;line two\u2066 here">\tindented\r\nnext\rline'
        "</failure></testcase></testsuite>",
    )

    [only] = read_reports(clone, ["junit.xml"]).cases

    assert only.name == "t.evilname"
    assert only.message == "line one line two here"
    assert only.trace == "\tindented\nnext\nline"


# --------------------------------------------------------------------------- SARIF


def test_a_real_ruff_sarif_report_gives_each_finding(clone: Path) -> None:
    write(clone, "src/bad.py", "import os\nx = 1\n\n\ndef f():\n    return undefined_name\n")
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "ruff"), "check", "--isolated", "--no-cache",
         "--select", "F", "--output-format=sarif", "src/bad.py"],
        cwd=clone, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    write(clone, "ruff.sarif", done.stdout)

    reading = read_reports(clone, ["ruff.sarif"])

    assert reading.reports_read == ("ruff.sarif",)
    assert reading.notes == ()
    assert reading.cases == (
        case(
            format="sarif",
            report="ruff.sarif",
            name="F401 src/bad.py:1",  # ruff writes file:// URIs: made relative to the clone
            message="`os` imported but unused",
            location="src/bad.py:1",
        ),
        case(
            format="sarif",
            report="ruff.sarif",
            name="F821 src/bad.py:6",
            message="Undefined name `undefined_name`",
            location="src/bad.py:6",
        ),
    )


def sarif(*results: Any, rules: Any = (), runs: Any = None) -> str:
    run = {"tool": {"driver": {"name": "t", "rules": list(rules)}}, "results": list(results)}
    return json.dumps({"version": "2.1.0", "runs": runs if runs is not None else [run]})


def result(rule: str, text: str, **more: Any) -> dict[str, Any]:
    where = {
        "physicalLocation": {"artifactLocation": {"uri": "src/a.js"}, "region": {"startLine": 3}}
    }
    return {"ruleId": rule, "message": {"text": text}, "locations": [where], **more}


SARIF_BY_HAND = sarif(
    result("no-undef", "'x' is not defined.", level="error"),
    result("no-unused-vars", "'y' is unused.", level="warning"),
    result("semi", "Missing semicolon.", level="error", suppressions=[{"kind": "inSource"}]),
    result("eqeqeq", "Expected '==='.", level="error", kind="pass"),
    result("max-len", "Line too long.", level="note"),
)


def test_sarif_errors_fail_and_warnings_notes_suppressed_and_passes_do_not(
    clone: Path,
) -> None:
    write(clone, "eslint.sarif", SARIF_BY_HAND)

    reading = read_reports(clone, ["eslint.sarif"])

    assert reading.failing == 1
    assert reading.cases == (
        case(
            format="sarif",
            report="eslint.sarif",
            name="no-undef src/a.js:3",
            message="'x' is not defined.",
            location="src/a.js:3",
        ),
    )


def test_sarif_warnings_fail_when_there_is_no_error_and_a_level_defaults_by_rule(
    clone: Path,
) -> None:
    rules = [{"id": "R1", "defaultConfiguration": {"level": "note"}}, {"id": "R2"}]
    write(
        clone,
        "semgrep.sarif",
        sarif(
            {"ruleIndex": 0, "message": {"text": "a note by its rule's default"}},
            {
                "ruleIndex": 1,
                "message": {"text": "uses {0} on line {1}", "arguments": ["eval", "9"]},
                "locations": [
                    {
                        "physicalLocation": {
                            "region": {"startLine": 9},
                            "artifactLocation": {"uri": "file:///elsewhere/app.py"},
                        }
                    }
                ],
            },
            rules=rules,
        ),
    )

    reading = read_reports(clone, ["semgrep.sarif"])

    assert reading.failing == 1
    assert reading.cases == (
        case(
            format="sarif",
            report="semgrep.sarif",
            name="R2 /elsewhere/app.py:9",
            message="uses eval on line 9",
            location="/elsewhere/app.py:9",
        ),
    )
    assert reading.notes == ("semgrep.sarif: no error-level results; its 1 warnings are shown",)


@given(
    st.sampled_from(["runs", "run", "results", "result", "message", "locations", "region"]),
    json_values,
)
@settings(max_examples=examples(150))
def test_sarif_of_any_shape_gives_a_reading_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, where: str, value: Any
) -> None:
    """Any JSON value at any level of the document: wrong types are skipped, not trusted."""
    clone = tmp_path_factory.mktemp("clone")
    good = result("E1", "m", level="error")
    documents = {
        "runs": {"version": "2.1.0", "runs": value},
        "run": {"version": "2.1.0", "runs": [value, {"results": [good]}]},
        "results": {"version": "2.1.0", "runs": [{"results": value}]},
        "result": {"version": "2.1.0", "runs": [{"results": [value, good]}]},
        "message": {"version": "2.1.0", "runs": [{"results": [{**good, "message": value}]}]},
        "locations": {"version": "2.1.0", "runs": [{"results": [{**good, "locations": value}]}]},
        "region": {
            "version": "2.1.0",
            "runs": [
                {
                    "results": [
                        {
                            **good,
                            "locations": [
                                {
                                    "physicalLocation": {
                                        "artifactLocation": {"uri": value},
                                        "region": value,
                                    }
                                }
                            ],
                        }
                    ]
                }
            ],
        },
    }
    write(clone, "r.sarif", json.dumps(documents[where], allow_nan=True))

    reading = read_reports(clone, ["r.sarif"])

    assert isinstance(reading, ReportReading)
    if where in ("run", "result"):
        assert "E1" in [c.name.split(" ")[0] for c in reading.cases]
    assert len(render_reports(reading, 2000).encode()) <= 2000


@given(
    st.sampled_from(
        [
            b"<testsuites><testcase name='t'><failure>",
            b'{"version":"2.1.0","runs":[',
            b"TAP version 13\nnot ok 1 - x\n  ---\n",
        ]
    ),
    st.binary(max_size=300),
)
@settings(max_examples=examples(200))
def test_any_bytes_after_a_reports_start_give_a_reading_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, start: bytes, rest: bytes
) -> None:
    clone = tmp_path_factory.mktemp("clone")
    write(clone, "report", start + rest)

    reading = read_reports(clone, ["report"])

    assert reading.reports_read in ((), ("report",))
    assert len(render_reports(reading, 1500).encode()) <= 1500


def test_sarif_too_deep_too_big_or_not_json_is_a_note(clone: Path) -> None:
    write(clone, "deep.sarif", '{"version": "2.1.0", "runs": ' + nested(100_000, "list") + "}")
    write(clone, "cut.sarif", sarif(result("E1", "m", level="error"))[:-9])
    write(clone, "other.json", '{"name": "package.json, not SARIF"}')
    with (clone / "huge.sarif").open("wb") as f:
        f.write(b"{")
        f.truncate(17 * MiB)

    reading = read_reports(clone, ["*.sarif", "other.json"])

    assert reading.cases == ()
    assert reading.reports_read == ()
    assert reading.notes == (
        "cut.sarif: unparsable JSON (Unterminated string starting at: line 1 column 252 (char 251))",
        "deep.sarif: JSON nested too deeply to parse",
        "huge.sarif: JSON of 17.0 MiB is over the 16.0 MiB parsed",
        "other.json: JSON, but not a SARIF report (no 'runs' and 'version')",
    )


def test_sarif_text_loses_terminal_sequences_and_lone_surrogates(clone: Path) -> None:
    message = "\x1b[31mred\x1b[0m \u202eevil\ud800 bell\x07"
    write(clone, "r.sarif", sarif(result("E1", message, level="error")))

    [only] = read_reports(clone, ["r.sarif"]).cases

    assert only.message == "red evil bell"


# --------------------------------------------------------------------------- TAP

NODE_TAP = """\
TAP version 13
# Subtest: cart
    # Subtest: adds prices
    not ok 1 - adds prices
      ---
      duration_ms: 0.71
      location: 'CLONE/test/cart.test.mjs:5:3'
      failureType: 'testCodeFailure'
      error: |-
        Expected values to be strictly equal:

        20 !== 30

      code: 'ERR_ASSERTION'
      name: 'AssertionError'
      stack: |-
        TestContext.<anonymous> (file:///CLONE/test/cart.test.mjs:7:12)
        async Test.run (node:internal/test_runner/test:640:9)
      ...
    # Subtest: empty cart
    ok 2 - empty cart
      ---
      duration_ms: 0.1
      ...
    # Subtest: later
    ok 3 - later # SKIP
      ---
      duration_ms: 0.05
      ...
    1..3
not ok 1 - cart
  ---
  duration_ms: 1.9
  type: 'suite'
  location: 'CLONE/test/cart.test.mjs:3:1'
  failureType: 'subtestsFailed'
  error: '1 subtest failed'
  code: 'ERR_TEST_FAILURE'
  ...
# Subtest: not written yet
not ok 2 - not written yet # TODO later
  ---
  duration_ms: 0.2
  ...
1..2
# tests 4
# pass 1
# fail 1
"""


def test_node_tap_gives_the_failing_leaf_not_its_parent_suite(clone: Path) -> None:
    write(clone, "tap.txt", NODE_TAP.replace("CLONE", str(clone)))

    reading = read_reports(clone, ["tap.txt"])

    assert reading.failing == 1
    [only] = reading.cases
    assert (only.format, only.name, only.kind) == ("tap", "cart > adds prices", "failure")
    assert only.message == "Expected values to be strictly equal:"
    assert only.location == "test/cart.test.mjs:5"
    assert only.trace.split("\n")[:4] == [
        "duration_ms: 0.71",
        "location: 'test/cart.test.mjs:5:3'".replace("test/", f"{clone}/test/"),
        "failureType: 'testCodeFailure'",
        "error: |-",
    ]
    assert len(only.trace.split("\n")) == 12


CLASSIC_TAP = """\
1..5
ok 1 - parses empty input
not ok 2 - rejects bad input
#   Failed test 'rejects bad input'
#   at t/parse.t line 12.
ok 3 # skip no network
not ok 4 - later # TODO not yet
not ok 5
"""


def test_classic_tap_skips_and_todos_are_not_failures(clone: Path) -> None:
    write(clone, "t.tap", CLASSIC_TAP + "Bail out! database unreachable\n")

    reading = read_reports(clone, ["t.tap"])

    assert reading.failing == 3
    assert [(c.name, c.kind, c.message) for c in reading.cases] == [
        ("rejects bad input", "failure", ""),
        ("test 5", "failure", ""),
        ("Bail out!", "error", "database unreachable"),
    ]


def test_tap_with_invalid_utf8_and_endless_lines_is_read_with_a_note(clone: Path) -> None:
    endless = b"# " + b"x" * (3 * MiB) + b"\n"
    write(clone, "t.tap", b"1..2\n" + endless + b"not ok 1 - caf\xe9 \xff\nok 2\n")

    reading = read_reports(clone, ["t.tap"])

    assert [c.name for c in reading.cases] == ["caf\ufffd \ufffd"]
    assert reading.notes == ("t.tap: not valid UTF-8 (the bad bytes were replaced)",)


# --------------------------------------------------------------------------- hostile XML

BILLION_LAUGHS = """<?xml version="1.0"?>
<!DOCTYPE testsuite [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<testsuite><testcase name="t"><failure message="&lol9;">&lol9;</failure></testcase></testsuite>
"""
EXTERNAL_ENTITY = """<?xml version="1.0"?>
<!DOCTYPE testsuite [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>
<testsuite><testcase name="t"><failure message="&xxe;">&xxe;</failure></testcase></testsuite>
"""
EXTERNAL_DTD = """<?xml version="1.0"?>
<!DOCTYPE testsuite SYSTEM "http://example.invalid/junit.dtd">
<testsuite><testcase name="t"><failure message="m"/></testcase></testsuite>
"""


def test_dtds_entities_and_external_references_are_refused_unread(clone: Path) -> None:
    write(clone, "r/1-bomb.xml", BILLION_LAUGHS)
    write(clone, "r/2-xxe.xml", EXTERNAL_ENTITY)
    write(clone, "r/3-dtd.xml", EXTERNAL_DTD)
    write(
        clone,
        "r/4-undeclared.xml",
        '<testsuite><testcase name="t"><failure message="&xxe;"/></testcase></testsuite>',
    )

    reading = read_reports(clone, ["r/*.xml"])

    refused = "skipped, refused: it declares a DTD (DTDs and entities are never read)"
    assert reading.notes == (
        f"r/1-bomb.xml: {refused}",
        f"r/2-xxe.xml: {refused}",
        f"r/3-dtd.xml: {refused}",
        "r/4-undeclared.xml: unparsable at line 1, column 30 (undefined entity); "
        "0 failing cases read before that",
    )
    assert reading.cases == ()
    assert "root:" not in reading.model_dump_json()
    assert reading.reports_read == ("r/4-undeclared.xml",)


def test_deep_nesting_stops_the_report_and_keeps_the_cases_before_it(clone: Path) -> None:
    depth = 100_000
    write(
        clone,
        "junit.xml",
        '<testsuites><testcase classname="t" name="first"><failure message="m"/></testcase>'
        + "<a>" * depth
        + "</a>" * depth
        + "</testsuites>",
    )

    reading = read_reports(clone, ["junit.xml"])

    assert [c.name for c in reading.cases] == ["t.first"]
    assert reading.notes == (
        "junit.xml: nested deeper than 256 elements; 1 failing case read before that",
    )


def test_a_single_token_over_16_mib_is_not_buffered_further(clone: Path) -> None:
    write(
        clone,
        "junit.xml",
        b'<testsuites><testcase classname="t" name="first"><failure message="m"/></testcase>'
        b'<testcase name="x" classname="' + b"y" * (17 * MiB) + b'"/></testsuites>',
    )

    reading = read_reports(clone, ["junit.xml"])

    assert [c.name for c in reading.cases] == ["t.first"]
    assert reading.notes == (
        "junit.xml: holds a single XML token over 16.0 MiB; 1 failing case read before that",
    )


def test_truncated_and_invalid_xml_keeps_the_cases_before_the_cut(clone: Path) -> None:
    first = '<testsuite><testcase classname="t" name="one"><failure message="first">body</failure></testcase>'
    write(
        clone,
        "cut.xml",
        first
        + '<testcase name="two"><failure message="second">Traceback\n  File "x.py", line 3, in f',
    )
    write(
        clone,
        "utf8.xml",
        first.encode()
        + b'<testcase name="two"><failure message="caf\xe9"/></testcase></testsuite>',
    )

    reading = read_reports(clone, ["cut.xml", "utf8.xml"])

    # Cut inside the second failure's body: that failure was already known to fail.
    assert [(c.report, c.name, c.message, c.location) for c in reading.cases] == [
        ("cut.xml", "t.one", "first", None),
        ("cut.xml", "two", "second", "x.py:3"),
        ("utf8.xml", "t.one", "first", None),
    ]
    assert reading.notes == (
        "cut.xml: unparsable at line 2, column 27 (no element found); 2 failing cases read before that",
        "utf8.xml: unparsable at line 1, column 138 (not well-formed (invalid token)); "
        "1 failing case read before that",
    )


# --------------------------------------------------------------------------- files


def test_a_report_over_the_size_cap_is_not_read_at_all(clone: Path) -> None:
    with (clone / "big.xml").open("wb") as f:  # sparse: nothing but its size on disk
        f.write(b'<testsuite><testcase name="t"><failure message="m"/></testcase></testsuite>')
        f.truncate(300 * MiB)
    write(
        clone,
        "small.xml",
        '<testsuite><testcase name="t"><failure message="m"/></testcase></testsuite>',
    )

    reading = read_reports(clone, ["big.xml", "small.xml"], max_report_bytes=64)

    # Parsed, the big one would give a case and then a note about its NUL bytes.
    assert reading.cases == ()
    assert reading.notes == (
        "big.xml: skipped, 300.0 MiB is over the 64 bytes a report may be (not read)",
        "small.xml: skipped, 75 bytes is over the 64 bytes a report may be (not read)",
    )
    default = read_reports(clone, ["big.xml"])
    assert default.notes == (
        "big.xml: skipped, 300.0 MiB is over the 256.0 MiB a report may be (not read)",
    )


def test_links_out_of_the_clone_are_refused_and_links_within_it_read(
    clone: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "junit.xml").write_text(
        '<testsuite><testcase name="secret"><failure message="outside"/></testcase></testsuite>'
    )
    (clone / "passwd.xml").symlink_to("/etc/passwd")
    (clone / "elsewhere.xml").symlink_to(outside / "junit.xml")
    (clone / "build").symlink_to(outside)
    write(clone, "real/junit.xml", GO_JUNIT_REPORT)
    (clone / "alias.xml").symlink_to(clone / "real" / "junit.xml")

    reading = read_reports(clone, ["*.xml", "build/*.xml", "**/junit.xml"])

    assert reading.notes == (
        "elsewhere.xml: skipped, its real path is outside the clone",
        "passwd.xml: skipped, its real path is outside the clone",
        "build: skipped, its real path is outside the clone",
    )
    assert reading.reports_read == ("alias.xml", "real/junit.xml")
    assert "outside" not in reading.model_dump_json().replace("outside the clone", "")


def test_a_fifo_or_directory_is_not_a_report_and_does_not_hang(clone: Path) -> None:
    os.mkfifo(clone / "fifo.xml")  # no writer: a blocking open would wait forever
    (clone / "dir.xml").mkdir()

    reading = read_reports(clone, ["*.xml"])

    assert reading.notes == (
        "dir.xml: skipped, not a regular file (a directory)",
        "fifo.xml: skipped, not a regular file (a FIFO)",
    )


def test_a_report_older_than_the_checks_start_is_stale(clone: Path) -> None:
    started = time.time()
    write(clone, "old.xml", GO_JUNIT_REPORT)
    os.utime(clone / "old.xml", (started - 3600, started - 3600))
    write(clone, "new.xml", GO_JUNIT_REPORT)

    write(clone, "coarse.xml", GO_JUNIT_REPORT)  # a clock tick, or a second, "before"
    os.utime(clone / "coarse.xml", (started - 1, started - 1))

    reading = read_reports(clone, ["old.xml", "new.xml", "coarse.xml"], not_before=started)

    assert reading.reports_read == ("new.xml", "coarse.xml")
    assert reading.notes == ("old.xml: skipped, stale: written before this check started",)
    # Without a start time, nothing is stale.
    assert read_reports(clone, ["old.xml"]).reports_read == ("old.xml",)


def test_patterns_that_leave_the_clone_or_name_git_are_refused(clone: Path) -> None:
    write(clone, ".git/junit.xml", GO_JUNIT_REPORT)
    write(clone, "sub/.git/junit.xml", GO_JUNIT_REPORT)

    reading = read_reports(
        clone, ["../junit.xml", "/etc/passwd", "a\x00b", ".git/*.xml", "", "**/*.xml"]
    )

    assert reading.notes == (
        "pattern '../junit.xml' refused: it must be relative to the clone, without '..'",
        "pattern '/etc/passwd' refused: it must be relative to the clone, without '..'",
        "pattern 'a\\x00b' refused: it holds a NUL character",
        "pattern '.git/*.xml' refused: it names .git, which is never read",
        "pattern '' refused: it is empty",
        "pattern '**/*.xml' matched nothing",  # .git is never searched
    )
    assert reading.reports_read == ()


def test_at_most_max_files_are_read(clone: Path) -> None:
    for name in ("a", "b", "c"):
        write(clone, f"{name}.xml", GO_JUNIT_REPORT)

    reading = read_reports(clone, ["*.xml", "a.xml"], max_files=2)

    assert reading.reports_read == ("a.xml", "b.xml")
    assert reading.notes == ("3 files matched; only the first 2 were read",)


def test_a_missing_clone_is_a_note(tmp_path: Path) -> None:
    reading = read_reports(tmp_path / "nowhere", ["junit.xml"])
    assert reading.notes == (f"the clone {tmp_path / 'nowhere'} is not a directory",)


# --------------------------------------------------------------------------- rendering


def test_rendering_shows_each_cause_once_before_repeats_and_errors_first() -> None:
    reading = ReportReading(
        cases=(
            case(name="t.a", message="boom", location="a.py:1", trace="line 1\n\nline 3"),
            case(name="t.b", message="boom"),
            case(name="t.c", message="other"),
            case(name="t.d", message="ImportError: no module x", kind="error"),
            case(
                format="sarif",
                report="r.sarif",
                name="F401 b.py:2",
                location="b.py:2",
                message="`os` unused",
            ),
        ),
        failing=7,
        reports_read=("junit.xml", "r.sarif"),
        notes=("old.xml: skipped, stale: written before this check started",),
    )

    assert render_reports(reading, 4096) == "\n".join(
        [
            "7 failing cases in reports read: junit.xml, r.sarif (showing 5)",
            "[junit error] t.d",
            "  ImportError: no module x",
            "  (from junit.xml)",
            "[junit failure] t.a",
            "  at a.py:1",
            "  boom",
            "  | line 1",
            "  |",
            "  | line 3",
            "  (from junit.xml)",
            "[junit failure] t.c",
            "  other",
            "  (from junit.xml)",
            "[sarif failure] F401 b.py:2",
            "  `os` unused",
            "  (from r.sarif)",
            "[junit failure] t.b",
            "  boom",
            "  (from junit.xml)",
            "note: old.xml: skipped, stale: written before this check started",
        ]
    )


def test_rendering_fits_whole_cases_in_any_budget() -> None:
    cases = tuple(
        case(name=f"t.case{i}", message=f"cause {i} " + "é" * (i * 7), trace="x\n" * (i % 4))
        for i in range(12)
    )
    reading = ReportReading(cases=cases, failing=40, reports_read=("junit.xml",), notes=("n",))
    blocks = render_reports(reading, 1 << 20).split("\n[")[1:]
    assert len(blocks) == 12

    for budget in range(0, 1400, 7):
        text = render_reports(reading, budget)
        assert len(text.encode()) <= budget
        shown = [b for b in blocks if "[" + b.split("\nnote:")[0] in text]
        heading = text.split("\n")[0] if text else ""
        if text:
            assert heading.startswith("40 failing cases in reports read: junit.xml (showing ")
            assert heading.endswith(f"(showing {len(shown)})")
            assert text.count("\n[junit failure]") == len(shown)  # no block cut short


def test_nothing_read_and_nothing_noted_renders_nothing() -> None:
    assert render_reports(ReportReading(), 4096) == ""
    passed = ReportReading(reports_read=("junit.xml",))
    assert render_reports(passed, 4096) == "0 failing cases in reports read: junit.xml"
