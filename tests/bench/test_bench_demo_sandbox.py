"""The demo bench's baseline is the shipped config with every part of the sandbox opted
out, and only that: it parses, and nothing but the sandbox settings differ."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from orchestrator import starter
from orchestrator.domain.config import parse_config

from conftest import ROOT


def _bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "bench_demo_sandbox", ROOT / "bench" / "bench_demo_sandbox.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_baseline_config_opts_every_stage_recipe_and_git_call_out_of_the_sandbox() -> None:
    text = starter.config_text()
    boxed = parse_config(text, Path("/demo/config.toml"))
    plain = parse_config(_bench().unsandboxed(text), Path("/demo/config.toml"))
    assert {s.sandbox for s in boxed.stages} == {None}
    assert {s.sandbox for s in plain.stages} == {"none"}
    assert plain.sandbox.git == "none" and plain.recovery.recipe_sandbox == "none"
    # The same pipeline otherwise: the same stages, commands and checks.
    strip = {"sandbox", "network"}
    assert [s.model_dump(exclude=strip) for s in plain.stages] == [
        s.model_dump(exclude=strip) for s in boxed.stages
    ]
