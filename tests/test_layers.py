"""The layers the architecture docs write down (docs/architecture/layers.md) hold, read from every import of every module.

Every import statement counts — at module level, inside a function (the lazy ones), under
``if TYPE_CHECKING:`` — because each is a dependency someone must understand: a lazy
import that closes a loop is still a loop. Two rules:

* an arrow goes only down the documented layer list (``<!-- layers -->`` in
  docs/architecture/layers.md), or stays inside one package;
* no module reaches itself again through imports, however long the way round.

And the list keeps DESIGN.md's order (its "Layer order" sentence, ``../shared/DESIGN.md``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "orchestrator"
LAYERS_PAGE = ROOT / "docs" / "architecture" / "layers.md"
_BLOCK = re.compile(r"<!-- layers: bottom first -->\n(?P<body>.*?)\n<!-- /layers -->", re.S)
# Where the design brief is: beside the project (or a worktree of it).
DESIGN_PAGES = (ROOT.parent / "shared" / "DESIGN.md", ROOT.parent.parent / "shared" / "DESIGN.md")
_DESIGN_ORDER = re.compile(r"Layer order, lowest first \([^)]*\):(?P<order>[^.]*)\.")


def layer_order(readme_text: str) -> dict[str, int]:
    """Package → its layer (0 at the bottom), as the README's layer block lists them: one
    line per layer, packages separated by commas, a parenthesised note after each."""
    found = _BLOCK.search(readme_text)
    assert found is not None, (
        "docs/architecture/layers.md has no <!-- layers: bottom first --> block"
    )
    order: dict[str, int] = {}
    for number, line in enumerate(x for x in found["body"].splitlines() if x.strip()):
        names = re.sub(r"\([^)]*\)", "", line)
        for name in (n.strip() for n in names.split(",")):
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), f"not a package: {line!r}"
            assert name not in order, f"{name} is listed twice"
            order[name] = number
    return order


def design_steps(design_text: str, packages: Iterable[str]) -> list[set[str]]:
    """DESIGN.md's layer order, lowest first: the packages each step of its "Layer order"
    sentence names, in its own words ("failure reading and recovery": reading, recovery;
    "redaction beside it" counts with domain). What follows a ``;`` outside parentheses
    (demo and stages, outside the core import path) is no step."""
    found = _DESIGN_ORDER.search(design_text)
    assert found is not None, 'DESIGN.md has no "Layer order, lowest first (...):" sentence'
    depth, text = 0, ""
    for char in found["order"]:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == ";" and depth == 0:
            break
        text += char
    known = set(packages)
    return [{w for w in re.findall(r"[a-z_]+", step) if w in known} for step in text.split("→")]


def against_design(steps: list[set[str]], order: Mapping[str, int]) -> list[str]:
    """Every pair DESIGN.md puts in one order and the layer list does not."""
    return [
        f"{low} is below {high} in DESIGN.md, not in layers.md"
        for number, lows in enumerate(steps)
        for highs in steps[number + 1 :]
        for low in sorted(lows)
        for high in sorted(highs)
        if not order[low] < order[high]
    ]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.AST, module: str, is_package: bool, known: Iterable[str]) -> set[str]:
    """The modules of ours ``tree`` imports anywhere in it (relative imports resolved;
    ``from a import b`` is module ``a.b`` when there is one, else ``a``)."""
    known = set(known)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        else:
            continue
        for named in names:
            # ``import a.b.c`` depends on the deepest module of ours it names.
            ours = named
            while ours and ours not in known:
                ours = ours.rpartition(".")[0]
            if ours and ours != module:
                found.add(ours)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in sorted(root.rglob("*.py"))}
    return {
        module: imports_of(
            ast.parse(path.read_text(encoding="utf-8"), filename=str(path)),
            module,
            path.name == "__init__.py",
            paths,
        )
        for module, path in paths.items()
    }


def package_of(module: str) -> str:
    """``orchestrator.app.driver`` → ``app``; the package's own ``__init__`` is ``orchestrator``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def arrows_against(graph: Mapping[str, set[str]], order: Mapping[str, int]) -> list[str]:
    """Every import that does not go down the layer list (or stay in its package)."""
    wrong = []
    for module, targets in sorted(graph.items()):
        mine = package_of(module)
        for target in sorted(targets):
            theirs = package_of(target)
            if theirs != mine and not order[theirs] < order[mine]:
                wrong.append(f"{module} -> {target} ({mine} may not import {theirs})")
    return wrong


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


@pytest.fixture(scope="module")
def order() -> dict[str, int]:
    return layer_order(LAYERS_PAGE.read_text(encoding="utf-8"))


def test_every_package_has_a_place_in_the_readmes_layers(
    graph: dict[str, set[str]], order: dict[str, int]
) -> None:
    packages = {package_of(module) for module in graph}
    assert sorted(packages - set(order)) == [], "a package the documented layers do not list"
    assert sorted(set(order) - packages) == [], "a layer the package no longer has"


def test_every_import_goes_down_the_layers(
    graph: dict[str, set[str]], order: dict[str, int]
) -> None:
    # The reader reads the real tree: the driver's own imports are there.
    assert {"orchestrator.app.services", "orchestrator.domain.config"} <= graph[
        "orchestrator.app.driver"
    ]
    assert arrows_against(graph, order) == []


def test_no_module_imports_itself_round_a_loop(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_the_reader_sees_lazy_type_checking_and_relative_imports(tmp_path: Path) -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n    from orchestrator.app.services import Services\n"
        "def f():\n    from ..cli import main\n    import orchestrator.actions.registry\n"
    )
    known = {
        "orchestrator.domain.sibling", "orchestrator.app.services", "orchestrator.cli",
        "orchestrator.cli.main", "orchestrator.actions", "orchestrator.actions.registry",
        "orchestrator.domain.evil",
    }  # fmt: skip
    found = imports_of(ast.parse(source), "orchestrator.domain.evil", False, known)
    assert found == {
        "orchestrator.domain.sibling", "orchestrator.app.services", "orchestrator.cli.main",
        "orchestrator.actions.registry",
    }  # fmt: skip


def test_an_upward_arrow_and_a_loop_are_caught() -> None:
    order = layer_order(
        "<!-- layers: bottom first -->\n    domain (rules)\n    actions, stages\n    app\n"
        "<!-- /layers -->"
    )
    assert order == {"domain": 0, "actions": 1, "stages": 1, "app": 2}
    graph = {
        "orchestrator.domain.config": {"orchestrator.actions.registry"},  # up
        "orchestrator.actions.registry": {"orchestrator.stages.clone"},  # sideways
        "orchestrator.app.driver": {"orchestrator.domain.config"},  # down: fine
        "orchestrator.stages.clone": set(),
    }
    assert arrows_against(graph, order) == [
        "orchestrator.actions.registry -> orchestrator.stages.clone (actions may not import stages)",
        "orchestrator.domain.config -> orchestrator.actions.registry (domain may not import actions)",
    ]
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(loop) == [["a", "b", "c"]]


def test_the_layer_list_keeps_designs_order(order: dict[str, int]) -> None:
    design = next((p for p in DESIGN_PAGES if p.is_file()), None)
    if design is None:
        pytest.skip("../shared/DESIGN.md is not beside the project")
    steps = design_steps(design.read_text(encoding="utf-8"), order)
    # The sentence is read as written: nine steps, redaction with domain, cli last.
    assert steps[:3] == [{"domain", "redaction"}, {"storage", "engines", "forges"},
                         {"reading", "recovery"}]  # fmt: skip
    assert [*map(sorted, steps[3:])] == [["execution"], ["actions"], ["app"], ["batch"],
                                         ["reports"], ["cli"]]  # fmt: skip
    assert against_design(steps, order) == []


def test_an_order_against_designs_is_caught() -> None:
    design = (
        "Layer order, lowest first (an arrow may only point down): domain (types; redaction "
        "beside it) → storage, engines → failure reading and recovery → reports → cli; demo "
        "outside.\nData flows one way."
    )
    known = {"domain", "redaction", "storage", "engines", "reading", "recovery", "reports",
             "cli", "demo"}  # fmt: skip
    steps = design_steps(design, known)
    assert steps == [{"domain", "redaction"}, {"storage", "engines"}, {"reading", "recovery"},
                     {"reports"}, {"cli"}]  # fmt: skip
    listed = layer_order(
        "<!-- layers: bottom first -->\n    redaction\n    domain\n    engines\n    reading\n"
        "    storage (state)\n    reports\n    recovery\n    cli\n    demo\n<!-- /layers -->"
    )
    assert against_design(steps, listed) == [
        "storage is below reading in DESIGN.md, not in layers.md",
        "recovery is below reports in DESIGN.md, not in layers.md",
    ]
