"""Only ``orchestrator/storage/`` knows where things are under the state dir and how they
are locked: proven from the syntax tree of every other module (not by grepping, so
comments and docstrings may still name the files they describe).

A module outside storage/ may not
* import ``fcntl`` (every lock goes through ``storage/_locks.py``);
* spell a state-dir file name (``ledger.jsonl``, ``.verdict-``, ...) in a string, an
  f-string or a glob pattern (``storage/layout.py`` names them all);
* join a state-dir directory onto a path (``state_dir / "runs"``);
* write files with ``atomic_write`` (the stores write what they own), nor hand-roll an
  atomic write (``os.replace``, ``os.rename``, ``tempfile.mkstemp``).

And no code outside ``storage/ledger/`` (tests and benches included) imports one of the
ledger package's inner modules: ``orchestrator.storage.ledger`` is its one face. The rest of
the orchestrator imports storage from ``orchestrator.storage`` (the protocols, opening a
state, the records), a public module beside it (``orchestrator.storage.layout``; never the
private ``_atomic``, ``_locks``, ``_face``), or the faces of the ledger, the fleet's Redis
stores and PostgreSQL; the face's two lists of names (for the type checker, for the
import) agree.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.storage._face import faced_names

from conftest import ROOT

PACKAGE = ROOT / "orchestrator"
STORAGE = PACKAGE / "storage"
LEDGER_DIR = STORAGE / "ledger"
LEDGER = "orchestrator.storage.ledger"
# Parts of the names under the state dir (see storage/layout.py).
FILE_NAME_PARTS = (
    "ledger.jsonl",
    "ledger.head",
    "ledger.lock",
    ".index.sqlite3",
    ".verdict-",
    ".bundle-",
    ".approval-",
    ".mechanical_fix",
    ".handoff.md",
    "pull-request.json",
)
FACE = "orchestrator.storage"
ATOMIC = "orchestrator.storage._atomic"
STATE_DIRS = ("runs", "locks", "batches", "tickets", "ticket", "clone", "logs")
# The calls an atomic write is made of: only storage/_atomic.py makes them.
ATOMIC_CALLS = {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp")}

# The stage programs run as processes of their own and write their record
# (``pull-request.json``) into the run workspace the runner hands them.
STAGE_PROGRAMS: set[tuple[str, str]] = {
    ("orchestrator/stages/open_pr_local.py", f"import {ATOMIC}"),
    ("orchestrator/stages/open_pr_local.py", "pull-request.json"),
    # The hosted forges' stages (GitHub, GitLab) share their record (``_open_pr``).
    ("orchestrator/stages/_open_pr.py", f"import {ATOMIC}"),
    ("orchestrator/stages/_open_pr.py", "pull-request.json"),
}
# Not the state dir at all: the demo project's ticket queue (``<workdir>/tickets``).
NOT_STATE: set[tuple[str, str]] = {
    ("orchestrator/demo/run.py", "/ 'tickets'"),
    # The crash log goes to the system's temp dir: the state dir may be what is broken.
    ("orchestrator/cli/main.py", "tempfile.mkstemp"),
    # No lock: the egress proxy sizes its splice pipe (F_SETPIPE_SZ), which only fcntl says.
    ("orchestrator/execution/egress_proxy.py", "import fcntl"),
}


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if STORAGE not in p.parents)


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (they may describe the files)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def violations(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, what) for every place ``tree`` locks, names or builds a state-dir path."""
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "fcntl":
                    yield node.lineno, "import fcntl"
        elif isinstance(node, ast.ImportFrom) and node.module == "fcntl":
            yield node.lineno, "import fcntl"
        elif isinstance(node, ast.ImportFrom) and (
            node.module == ATOMIC
            or (node.module == FACE and any(a.name == "atomic_write" for a in node.names))
        ):
            yield node.lineno, f"import {ATOMIC}"
        elif (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        ):
            for part in FILE_NAME_PARTS:
                if part in node.value:
                    yield node.lineno, part
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Constant)
            and node.right.value in STATE_DIRS
        ):
            yield node.lineno, f"/ {node.right.value!r}"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and (node.func.value.id, node.func.attr) in ATOMIC_CALLS
        ):
            yield node.lineno, f"{node.func.value.id}.{node.func.attr}"


def test_the_check_finds_each_kind_of_violation() -> None:
    source = (
        '"""Docstrings may say ledger.jsonl."""\n'
        "import fcntl\n"
        "from fcntl import flock\n"
        'a = state_dir / "locks"\n'
        'b = runs.glob(f"{run_id}.verdict-*.json")\n'
        'c = "ledger.jsonl"\n'
        'd = Path("x") / "runs" / name\n'
        "from orchestrator.storage._atomic import atomic_write\n"
        "os.replace(tmp, path)\n"
        'fd, tmp = tempfile.mkstemp(dir=".")\n'
    )
    found = [what for _, what in violations(ast.parse(source))]
    assert sorted(found) == sorted(
        [
            "import fcntl",
            "import fcntl",
            "/ 'locks'",
            ".verdict-",
            "ledger.jsonl",
            "/ 'runs'",
            f"import {ATOMIC}",
            "os.replace",
            "tempfile.mkstemp",
        ]
    )


def test_only_storage_knows_paths_locks_and_file_names_under_the_state_dir() -> None:
    allowed = NOT_STATE | STAGE_PROGRAMS
    seen: set[tuple[str, str]] = set()
    offending = []
    for path in modules():
        for line, what in violations(ast.parse(path.read_text(), filename=str(path))):
            site = (rel(path), what)
            seen.add(site)
            if site not in allowed:
                offending.append(f"{rel(path)}:{line}: {what}")
    assert offending == [], (
        "use orchestrator.storage (layout, files, locks) instead:\n" + "\n".join(offending)
    )
    stale = sorted(allowed - seen)
    assert stale == [], f"migrated: remove from the allow-list: {stale}"


def inner_ledger_imports(tree: ast.AST, inner: set[str]) -> Iterator[tuple[int, str]]:
    """(line, module) for every import of a module inside the ledger package."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
            if node.module == LEDGER:  # ``from orchestrator.storage.ledger import chain``
                names += [f"{LEDGER}.{a.name}" for a in node.names if a.name in inner]
        else:
            continue
        for name in names:
            if name.startswith(f"{LEDGER}."):
                yield node.lineno, name


def test_the_ledger_check_finds_inner_imports() -> None:
    source = (
        "from orchestrator.storage.ledger import Ledger, LedgerRow\n"
        "from orchestrator.storage.ledger.chain import Ledger\n"
        "import orchestrator.storage.ledger.index\n"
        "from orchestrator.storage.ledger import reading\n"
        "from orchestrator.storage.ledger_other import x\n"
    )
    found = [name for _, name in inner_ledger_imports(ast.parse(source), {"chain", "reading"})]
    assert found == [
        f"{LEDGER}.chain",
        f"{LEDGER}.index",
        f"{LEDGER}.reading",
    ]


def test_only_the_ledger_package_imports_its_inner_modules() -> None:
    inner = {p.stem for p in LEDGER_DIR.glob("*.py")} - {"__init__"}
    assert {"chain", "row", "index"} <= inner  # the check looks at the real package
    sources = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "bench").rglob("*.py"),
    ]
    # An import of the ledger's inner modules names the ledger, whether absolute or
    # relative: a file that never says "ledger" is not parsed (most of the tests are not).
    texts = {path: path.read_text() for path in sources if LEDGER_DIR not in path.parents}
    offending = [
        f"{rel(path)}:{line}: {name}"
        for path, text in sorted(texts.items())
        if "ledger" in text
        for line, name in inner_ledger_imports(ast.parse(text, filename=str(path)), inner)
    ]
    assert offending == [], f"import these from {LEDGER} (its __init__) instead:\n" + "\n".join(
        offending
    )


SUBPACKAGES = {LEDGER, f"{FACE}.redis", f"{FACE}.postgres"}
PUBLIC = {FACE, *SUBPACKAGES} | {
    f"{FACE}.{p.stem}" for p in STORAGE.glob("*.py") if not p.stem.startswith("_")
}


def storage_modules_imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, module) for every storage module an import names, anywhere in ``tree``
    (``from orchestrator.storage import x`` names the face, whatever ``x`` is)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        else:
            continue
        for name in names:
            if name == FACE or name.startswith(f"{FACE}."):
                yield node.lineno, name


def test_the_face_check_finds_a_door_past_the_faces() -> None:
    source = (
        "from orchestrator.storage import FileStorage\n"
        "from orchestrator.storage.runs import RunStore\n"
        "def f():\n    import orchestrator.storage.redis.client\n"
    )
    assert [m for _, m in storage_modules_imported(ast.parse(source))] == [
        FACE, f"{FACE}.runs", f"{FACE}.redis.client",
    ]  # fmt: skip


def test_the_orchestrator_imports_storage_through_its_face_and_public_modules() -> None:
    assert {f"{FACE}.layout", f"{FACE}.runs"} <= PUBLIC and f"{FACE}._locks" not in PUBLIC
    doors = []
    for path in modules():
        for line, module in storage_modules_imported(ast.parse(path.read_text())):
            if module not in PUBLIC and (rel(path), f"import {module}") not in STAGE_PROGRAMS:
                doors.append(f"{rel(path)}:{line}: {module}")
    assert doors == [], "import it from orchestrator.storage or a public module of it"


@pytest.mark.parametrize("package", [FACE, f"{FACE}.redis"])
def test_a_face_lists_each_name_once_and_each_comes_from_its_module(package: str) -> None:
    """The face's one list is its ``if TYPE_CHECKING:`` imports (what the type checker
    reads); the runtime serves exactly those, from those modules, and nothing else."""
    face = importlib.import_module(package)
    source = Path(face.__file__ or "").read_text()
    where = faced_names(source)
    assert 0 < len(where) <= 40, sorted(where)
    for name, module in where.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name), name
    with pytest.raises(AttributeError, match=r"has no attribute 'StateLayuot'"):
        face.StateLayuot  # noqa: B018 - a misspelt name is an error, not Any
    # The type checker sees no module __getattr__ (which would type any name as Any).
    [block] = [n for n in ast.parse(source).body if isinstance(n, ast.If)]
    assert all(not isinstance(n, ast.Assign) for n in block.body)
    # The runtime reads the block line by line; the type checker reads it as Python.
    read = {
        (a.asname or a.name): n.module
        for n in block.body if isinstance(n, ast.ImportFrom) and n.module for a in n.names
    }  # fmt: skip
    assert where == read
