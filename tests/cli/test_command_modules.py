"""Each subcommand's module stands alone: what two commands share lives in ``cli/`` beside
them (preflight, published, arguments, to_fleet, console), so a change to one command
cannot reach into another through its module."""

from __future__ import annotations

import ast
from pathlib import Path

import orchestrator.cli.commands as commands

COMMANDS = Path(commands.__file__).parent


def _imported_commands(path: Path) -> set[str]:
    """The command modules ``path`` imports, at module level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("orchestrator.cli.commands."):
                names.add(node.module.rsplit(".", 1)[1])
            elif node.module == "orchestrator.cli.commands":
                names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(
                alias.name.rsplit(".", 1)[1]
                for alias in node.names
                if alias.name.startswith("orchestrator.cli.commands.")
            )
    return names - {path.stem}


def test_no_command_module_imports_another() -> None:
    modules = sorted(p for p in COMMANDS.glob("*.py") if p.name != "__init__.py")
    assert len(modules) > 20, "the commands folder moved: this test reads nothing"
    crossing = {p.stem: sorted(_imported_commands(p)) for p in modules if _imported_commands(p)}
    assert crossing == {}


def test_the_reader_sees_an_import_of_another_command(tmp_path: Path) -> None:
    module = tmp_path / "resume.py"
    module.write_text(
        "from orchestrator.cli.commands.run import exit_code\n"
        "def f():\n    from orchestrator.cli.commands import prune\n"
    )
    assert _imported_commands(module) == {"run", "prune"}
