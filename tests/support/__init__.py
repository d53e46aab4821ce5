"""Helpers the tests share: fakes, servers, fixtures and the scripts tests start."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
