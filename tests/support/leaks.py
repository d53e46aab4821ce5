"""Where a secret (a forge token, a webhook URL) must never be: in what a command said,
and in any file under a directory (the state dir)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def assert_not_leaked(secrets: Iterable[str], said: str = "", *under: Path) -> None:
    """No ``secret`` in ``said`` nor in the bytes of any file below each of ``under``."""
    secrets = tuple(secrets)
    for secret in secrets:
        assert secret not in said, f"a secret is in the output: {secret[:6]}…"
    for root in under:
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for secret in secrets:
                    assert secret.encode() not in data, path
