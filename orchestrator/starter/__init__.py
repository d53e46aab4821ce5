"""The files ``orchestrator init`` writes, shipped inside the package so that an installed
orchestrator (a wheel, pipx, a worker image) has them wherever it is run from.

``config.toml`` here is the default pipeline; the repository's own ``config.toml`` is a
copy of it (a test keeps the two equal), and the demo runs with it.
"""

from __future__ import annotations

from importlib.resources import files

CONFIG_NAME = "config.toml"
EXAMPLE_TICKET_NAME = "EXAMPLE-1.md.example"


def config_text() -> str:
    """The commented starter ``config.toml``: the default pipeline."""
    return files(__package__).joinpath(CONFIG_NAME).read_text(encoding="utf-8")


def example_ticket_text() -> str:
    """An example ticket, named so that ``orchestrator batch`` does not queue it."""
    return files(__package__).joinpath(EXAMPLE_TICKET_NAME).read_text(encoding="utf-8")


PLAYBOOK_DIR = "playbook"


def builtin_playbook_texts() -> tuple[tuple[str, str], ...]:
    """The built-in playbook entries (file name, TOML text), in name order: the same format
    as a project's ``playbook/*.toml``, which take their place by name."""
    folder = files(__package__).joinpath(PLAYBOOK_DIR)
    return tuple(
        (item.name, item.read_text(encoding="utf-8"))
        for item in sorted(folder.iterdir(), key=lambda i: i.name)
        if item.name.endswith(".toml")
    )
