"""The ticket files forge issues became (``intake/<source>/<ticket-id>.md``): written
atomically, and only when their text changed, so an unchanged issue leaves the file (and
its mtime) alone."""

from __future__ import annotations

from pathlib import Path

from orchestrator.storage._atomic import atomic_write
from orchestrator.storage.layout import StateLayout


class IntakeFiles:
    """The intake ticket files of one state dir."""

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout

    def path(self, source_id: str, ticket_id: str) -> Path:
        return self.layout.intake_ticket_path(source_id, ticket_id)

    def read(self, source_id: str, ticket_id: str) -> str | None:
        """The file's text, or None when there is none (or it is not UTF-8)."""
        try:
            return self.path(source_id, ticket_id).read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def write(self, source_id: str, ticket_id: str, text: str) -> Path:
        """Write the ticket (0644: a ticket is no secret, and people read it)."""
        path = self.path(source_id, ticket_id)
        atomic_write(path, text.encode("utf-8"), mode=0o644)
        return path

    def paths(self, source_id: str) -> list[Path]:
        """Every ticket file of the source, by name."""
        directory = self.layout.intake_dir(source_id)
        return sorted(directory.glob("*.md")) if directory.is_dir() else []
