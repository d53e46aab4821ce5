"""The fleet's signing key (issue 40): ``orchestrator fleet keygen`` makes it once, mode
0600, where the config names it; ``doctor`` says when it is missing, readable by others or
not the certificate's; the worker refuses to start without it."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.domain.errors import EXIT_COMPLETED, EXIT_USAGE

from conftest import bash_stage, write_ticket
from support.fleet_keys import install_fleet_key
from support.fleet_machines import counted, write_fleet_config
from support.sandbox_required import require_sandbox


def doctor_says(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    main(["--config", str(config), "doctor", "--json"])
    checks = json.loads(capsys.readouterr().out)["checks"]
    [fleet] = [c for c in checks if c["name"] == "fleet-key"]
    return dict(fleet)


@pytest.mark.slow
def test_keygen_makes_a_private_pair_once_and_doctor_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A loopback broker nobody listens on: doctor tries it, and checks the key anyway.
    config = write_fleet_config(tmp_path, "redis://127.0.0.1:1/0", "ns", counted("a"))
    for made in ("fleet.key", "fleet.crt"):
        (tmp_path / made).unlink()
    assert doctor_says(config, capsys)["status"] == "fail"
    assert "orchestrator fleet keygen" in str(doctor_says(config, capsys)["detail"])
    assert main(["--config", str(config), "fleet", "keygen"]) == EXIT_COMPLETED
    said = capsys.readouterr().out
    assert f"fleet key: {tmp_path / 'fleet.key'}" in said
    for made in ("fleet.key", "fleet.crt"):
        assert stat.S_IMODE((tmp_path / made).stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in (tmp_path / "fleet.key").read_bytes()
    key_before = (tmp_path / "fleet.key").read_bytes()
    fleet = doctor_says(config, capsys)
    assert (fleet["status"], fleet["detail"]) == (
        "ok",
        f"{tmp_path / 'fleet.key'} signs the fleet's task messages",
    )
    # Made once: a second keygen replaces nothing.
    assert main(["--config", str(config), "fleet", "keygen"]) == EXIT_USAGE
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "fleet.key").read_bytes() == key_before
    # Readable by others: refused, with the fix.
    (tmp_path / "fleet.key").chmod(0o644)
    fleet = doctor_says(config, capsys)
    assert fleet["status"] == "fail"
    assert "is readable by others (mode 0644): chmod 600" in str(fleet["detail"])
    (tmp_path / "fleet.key").chmod(0o600)
    # A certificate that is not the key's (another fleet's): refused.
    other = install_fleet_key(tmp_path / "other", name="other")
    (tmp_path / "fleet.crt").write_bytes(other.certificate.read_bytes())
    assert "is not the key" in str(doctor_says(config, capsys)["detail"])


def test_the_worker_refuses_to_start_without_the_fleet_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_fleet_config(tmp_path, "redis://127.0.0.1:1/0", "ns", counted("a"))
    (tmp_path / "fleet.key").unlink()
    assert main(["--config", str(config), "worker"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"the fleet's key {tmp_path / 'fleet.key'} does not exist" in err
    assert "orchestrator fleet keygen" in err


def test_a_sandboxed_stage_cannot_read_the_fleet_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Who holds the key can queue work for every worker: a stage (the repository's own
    tests, an engine) must not see it, though it sits beside the config."""
    require_sandbox()
    key = tmp_path / "fleet.key"
    peek = f"cat {key} {tmp_path / 'fleet.crt'}; ls -la {tmp_path}; exit 0"
    config = write_fleet_config(tmp_path, "redis://127.0.0.1:1/0", "ns", bash_stage("peek", peek))
    write_ticket(tmp_path / "tickets", "T-1")
    assert main(["--config", str(config), "run", str(tmp_path / "tickets" / "T-1.md")]) == 0
    capsys.readouterr()
    [log] = (tmp_path / "state" / "runs").glob("*/logs/*peek*.log")
    seen = log.read_text(errors="replace")
    assert "No such file or directory" in seen, seen
    assert "PRIVATE KEY" not in seen and "CERTIFICATE" not in seen
    assert "fleet.key" not in seen.replace(str(key), "")  # not listed beside the config
