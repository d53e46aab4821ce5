"""Issue 40, items 1 and 2: a stage sees only what it is handed, by allow-list.

The README's own setup, through the real CLI under the real bubblewrap: ``orchestrator
init`` in a project directory, every key in its ``orchestrator.env`` (read into the
environment as cron's ``set -a; . ./orchestrator.env`` does), a file with a secret next to
the config, oddly named secrets in the environment (a webhook URL, a database URL, base64
credentials) and a home with an ssh key. The repository is hostile: its own unit test
(the starter config's ``project-tests`` check, run first on the base commit) tries to
read the config directory, the env file, every file next to the config, its own
environment and ``/proc/self/environ``, the homes, ``/srv``, ``/mnt``, ``/var``, ``/run``
and the state dir, reports what it could open, and fails with everything it found in
its message — as written, reversed and base64 — so that the hand-off quotes it. No value
may appear, in any of those forms, anywhere the run wrote or said; the test's own report
shows each refusal.

Everything lives outside /tmp (under /var/tmp), so a refusal is the allow-list's, not the
private /tmp's."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import orchestrator_cmd, subprocess_env, write_ticket
from support.gitrepo import bare_clone, commit_files, init_repo
from support.sandbox_required import require_sandbox

pytestmark = pytest.mark.slow

# What `orchestrator init`'s env file holds once the user has filled it in.
ENV_FILE_KEYS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-canaryALLOWLIST0000000000000000000000000000000",
    "GITHUB_TOKEN": "ghp_canaryALLOWLIST00000000000000000000000",
    "ORCHESTRATOR_APPROVAL_KEY": "canary-approval-key-allowlist-000000000000000000",
    "ORCHESTRATOR_LEDGER_KEY": "canary-ledger-key-allowlist-00000000000000000000",
    "ORCHESTRATOR_BROKER_URL": "redis://:canaryBrokerPassw0rd@127.0.0.1:6379/0",
}
# Secrets whose names no shape rule knows.
ODD_SECRETS = {
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0CANARY/B0CANARY/canarySlackHook00",
    "DATABASE_URL": "postgresql://u:canaryDbPassw0rd@db.internal/app",
    "DEPLOY_CREDS_B64": base64.b64encode(b"deploy:canary-deploy-creds-0000").decode(),
}
NEXT_TO_CONFIG = "canary-next-to-the-config-00000000"
HOME_SECRET = "canary-home-ssh-key-allowlist-0000"

# The repository's own unit test. It reports what it could open (PROBE line), then fails
# quoting whatever it read, three ways, so the failure message carries it on.
HOSTILE_TEST = r"""
import base64, json, os, unittest

ARGS = json.loads(open(os.path.join(os.path.dirname(__file__), "args.json")).read())


class Harvest(unittest.TestCase):
    def test_harvest(self):
        opened, found = {}, []

        def look(name, path):
            try:
                if os.path.isdir(path):
                    entries = sorted(os.listdir(path))
                    opened[name] = "listed: " + ",".join(entries)[:300]
                    for entry in entries:
                        inner = os.path.join(path, entry)
                        if os.path.isfile(inner):
                            try:
                                found.append(open(inner, errors="replace").read())
                            except OSError:
                                pass
                else:
                    text = open(path, errors="replace").read()
                    found.append(text)
                    opened[name] = "read %d bytes" % len(text)
            except OSError as exc:
                opened[name] = "refused: " + type(exc).__name__

        look("config_dir", ARGS["config_dir"])
        look("env_file", os.path.join(ARGS["config_dir"], "orchestrator.env"))
        look("config_file", os.path.join(ARGS["config_dir"], "config.toml"))
        look("next_to_config", os.path.join(ARGS["config_dir"], "deploy-notes.txt"))
        look("home_key", ARGS["home_key"])
        look("proc_environ", "/proc/self/environ")
        look("proc_1_environ", "/proc/1/environ")
        for place in ("/home", "/root", "/srv", "/mnt", "/var", "/run", ARGS["state_dir"]):
            look(place, place)
        found.append(json.dumps(dict(os.environ)))
        opened["environ"] = sorted(os.environ)
        print("PROBE " + json.dumps(opened), flush=True)
        text = "\n".join(found)
        message = "\n".join([
            text, text[::-1], base64.b64encode(text.encode()).decode(),
        ])
        self.fail("harvest:\n" + message[-60000:])
"""


@pytest.fixture
def outside() -> Iterator[Path]:
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path(__file__).parent
    path = base / f"orch-allow-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def forms(value: str) -> list[str]:
    """A value as written, reversed and in base64 (whole, and the stable middle that shows
    at any offset inside a longer base64 text)."""
    raw = value.encode()
    out = [value, value[::-1]]
    for shift in range(3):
        chunk = raw[shift:]
        encoded = base64.b64encode(chunk[: len(chunk) - len(chunk) % 3]).decode()
        out.append(encoded[4:-4] if len(encoded) > 12 else encoded)
    return out


def leaks(root: Path, needles: list[str], skip: set[Path]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink() and path not in skip:
            data = path.read_bytes()
            found += [f"{path}: {n}" for n in needles if n.encode() in data]
    return found


@pytest.mark.parametrize(
    "declared",
    [False, True],
    ids=["default", "readable-root"],
)
def test_a_hostile_unit_test_sees_no_key_in_the_readme_setup(outside: Path, declared: bool) -> None:
    """``default``: the starter config as ``init`` writes it. ``readable-root``: the check
    declares the whole config directory readable; the env file is still empty inside."""
    require_sandbox()
    home = outside / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(HOME_SECRET)
    project = outside / "project"
    project.mkdir()
    env = subprocess_env(HOME=str(home), DRY_RUN="false", **ODD_SECRETS)
    done = subprocess.run(
        orchestrator_cmd("init"), env=env, cwd=project, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    env_file = project / "orchestrator.env"
    env_file.write_text(
        env_file.read_text() + "".join(f"{k}={v}\n" for k, v in ENV_FILE_KEYS.items())
    )
    (project / "deploy-notes.txt").write_text(NEXT_TO_CONFIG)
    config = project / "config.toml"
    if declared:
        text = config.read_text()
        anchor = 'name = "project-tests"\n'
        assert text.count(anchor) == 1
        config.write_text(text.replace(anchor, anchor + 'readable = ["{root}"]\n'))
    state = project / ".state"
    args = {
        "config_dir": str(project), "home_key": str(home / ".ssh" / "id_ed25519"),
        "state_dir": str(state),
    }  # fmt: skip
    work = init_repo(outside / "work")
    commit_files(
        work,
        {"README.md": "hello\n", "tests/__init__.py": "", "tests/args.json": json.dumps(args),
         "tests/test_harvest.py": HOSTILE_TEST},
        "initial",
    )  # fmt: skip
    origin = bare_clone(outside / "work", outside / "origin.git")
    ticket = write_ticket(project / "tickets", "T-9", repository=str(origin))
    # As cron runs it: the env file's keys in the environment.
    env.update(ENV_FILE_KEYS)
    done = subprocess.run(
        orchestrator_cmd("--config", str(config), "run", str(ticket)),
        env=env, cwd=project, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    # The base is red (the hostile test fails): the run stops for a person, with a hand-off.
    assert "base_red" in output, output
    logs = sorted(state.glob("base_checks/**/*project-tests*")) + sorted(
        state.glob("runs/T-9-*/logs/*project-tests*.log")
    )
    probe = next(
        (
            line
            for log in logs
            for line in log.read_text().splitlines()
            if line.startswith("PROBE ")
        ),
        None,
    )
    assert probe is not None, (logs, output)
    opened = json.loads(probe[len("PROBE ") :])

    # What it could open: the refusals.
    # (/proc/1 is the sandbox's own first process: its environment is the allow-list too.)
    assert str(opened["home_key"]).startswith("refused"), opened["home_key"]
    for place in ("/home", "/srv", "/mnt", "/var", "/run"):
        # Refused, or only the empty directories on the way to what it was handed (its
        # clone lies under /var/tmp here): a name, never a file.
        said = str(opened[place])
        on_the_way = (
            {outside.relative_to(place).parts[0]} if outside.is_relative_to(place) else set()
        )
        assert said.startswith("refused") or (
            said.startswith("listed: ") and set(filter(None, said[8:].split(","))) <= on_the_way
        ), (place, said)
    # The state dir: at most the empty directory on the way to its clone.
    assert str(opened[str(state)]).startswith("refused") or opened[str(state)] == "listed: runs"
    # /root exists only where this installation lies under it, and then holds that alone.
    assert str(opened["/root"]).startswith("refused") or "ssh" not in opened["/root"]
    if declared:
        # The directory it asked for, but never the env file (masked: unreadable).
        assert str(opened["env_file"]).startswith("refused"), opened
        assert opened["config_file"].startswith("read "), opened
    else:
        for name in ("env_file", "config_file", "next_to_config"):
            assert str(opened[name]).startswith("refused"), (name, opened[name])
        # The config's directory: at most the empty directory on the way to the clone.
        said = str(opened["config_dir"])
        assert said.startswith("refused") or said == "listed: .state", said
    # Its environment: the allow-list, and nothing a name-shape rule would have missed.
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "TERM", "TZ", "PWD", "ORCH_PROCESS_MARK"}
    extra = [
        n for n in opened["environ"]
        if n not in allowed and not n.startswith(("ORCH_", "LC_", "GIT_AUTHOR_", "GIT_COMMITTER_"))
    ]  # fmt: skip
    assert extra == [], extra

    # No value, in any of its forms, anywhere the run wrote or said.
    values = [*ENV_FILE_KEYS.values(), *ODD_SECRETS.values(), HOME_SECRET]
    values += ["canaryBrokerPassw0rd", "canaryDbPassw0rd"]
    if not declared:
        values.append(NEXT_TO_CONFIG)
    needles = [form for value in values for form in forms(value)]
    sources = {env_file, project / "deploy-notes.txt"}
    assert leaks(project, needles, sources) == []
    assert [n for n in needles if n in output] == []
    assert leaks(home, needles, {home / ".ssh" / "id_ed25519"}) == []
