"""``orchestrator fleet keygen``: make the fleet's signing key and its certificate (issue
40), where the config says they are (``[distributed] fleet_key`` / ``fleet_certificate``,
by default ``fleet.key`` and ``fleet.crt`` beside the config file), each mode 0600.

Every task message on the broker is signed with the key and a worker runs only what the
certificate verifies, so the pair is made once and copied to every machine of the fleet
(the batch's and each worker's), never into a repository, never readable by a stage.
``doctor`` checks it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "fleet", help="the fleet's signing key: `fleet keygen` makes it (once per fleet)"
    )
    actions = parser.add_subparsers(dest="fleet_command", metavar="ACTION", required=True)
    actions.add_parser(
        "keygen",
        help="make the fleet's private key and certificate (mode 0600) where the config "
        "names them; refuses to replace existing ones",
    )


def run(args: argparse.Namespace, config_file: Path, out: TextIO) -> int:
    from orchestrator.app.fleet_key import fleet_key_files, generate_fleet_key
    from orchestrator.cli.extras import require_distributed
    from orchestrator.domain.config import load_config
    from orchestrator.domain.errors import EXIT_COMPLETED

    require_distributed("fleet keygen")
    fleet = fleet_key_files(load_config(config_file))
    generate_fleet_key(fleet)
    out.write(
        f"fleet key: {fleet.key}\nfleet certificate: {fleet.certificate}\n"
        "both mode 0600; copy them (same paths beside each machine's config) to every machine "
        "that runs `batch --backend celery`, `worker` or `approve`\n"
    )
    return EXIT_COMPLETED
