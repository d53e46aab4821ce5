"""The project as a user gets it: an installed wheel, not this checkout.

* every library the package imports is declared in pyproject.toml;
* a non-editable install into a fresh environment, run from an empty directory, has its
  stage programs, its default config and its demo (slow: builds and installs a wheel).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from conftest import ROOT


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_distributions(extra: str | None = None) -> set[str]:
    """The required dependencies, or with ``extra`` those of that optional extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return {_normalise(re.split(r"[<>=!~\[; ]", dep, maxsplit=1)[0]) for dep in deps}


# The distributed mode's libraries are an optional extra: only its packages (the fleet's
# Redis stores and the Celery executor, and the fleet's signing key, which ``doctor``
# checks from the app layer) may import them. Likewise the PostgreSQL driver (the
# ``postgres`` extra), under the PostgreSQL storage only.
DISTRIBUTED_PACKAGES = (
    "orchestrator/storage/redis/",
    "orchestrator/batch/celery/",
    "orchestrator/app/fleet_key.py",
)
POSTGRES_PACKAGES = ("orchestrator/storage/postgres/",)
# Each optional extra, and the only packages that may import its libraries.
OPTIONAL_EXTRAS = {"distributed": DISTRIBUTED_PACKAGES, "postgres": POSTGRES_PACKAGES}


def imported_top_level_modules() -> dict[str, set[str]]:
    """Top-level module → the package files that import it (absolute imports only)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "orchestrator").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(path.relative_to(ROOT).as_posix())
    return found


@pytest.mark.slow
def test_every_directly_imported_library_is_declared() -> None:
    """A library used only through another's dependencies breaks the day that other
    drops it: whatever the package imports itself, it declares."""
    assert undeclared_imports(imported_top_level_modules()) == {}, (
        "imported but not declared in pyproject.toml (or an optional extra's library "
        "imported outside its packages)"
    )


def undeclared_imports(imported: dict[str, set[str]]) -> dict[str, list[str]]:
    """Module → its importers, for each library not declared where it is imported: a
    required dependency anywhere, an optional extra's only under that extra's packages."""
    declared = declared_distributions()
    providers = packages_distributions()
    undeclared = {}
    for module, importers in sorted(imported.items()):
        if module in sys.stdlib_module_names or module in ("orchestrator", "__future__"):
            continue
        allowed = set(declared)
        for extra, packages in OPTIONAL_EXTRAS.items():
            if all(i.startswith(packages) for i in importers):
                allowed |= declared_distributions(extra)
        dists = {_normalise(d) for d in providers.get(module, [module])}
        if not dists & allowed:
            undeclared[module] = sorted(importers)
    return undeclared


@pytest.mark.slow
def test_psycopg_is_the_postgres_extras_and_only_its_package_may_import_it() -> None:
    assert "psycopg" in declared_distributions("postgres")
    inside = "orchestrator/storage/postgres/connect.py"
    assert undeclared_imports({"psycopg": {inside}}) == {}
    outside = {inside, "orchestrator/storage/runs.py"}
    assert undeclared_imports({"psycopg": outside}) == {"psycopg": sorted(outside)}
    # Nor may the PostgreSQL storage import the distributed mode's libraries.
    assert undeclared_imports({"redis": {inside}}) == {"redis": [inside]}


def _copy_source(dest: Path) -> Path:
    """What a build needs, copied out of the checkout: the build never writes into it."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "orchestrator",
        dest / "orchestrator",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    return dest


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc  # type: ignore[no-any-return]


def assert_metadata(wheel: Path) -> None:
    """The distribution's name (not the index's unrelated ``orchestrator``), its one
    version, its licence and the licence's text inside the wheel."""
    import email
    import zipfile

    from orchestrator import __version__

    with zipfile.ZipFile(wheel) as archive:
        info = f"ticket_orchestrator-{__version__}.dist-info"
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
        licence = archive.read(f"{info}/licenses/LICENSE").decode()
    assert metadata["Name"] == "ticket-orchestrator"
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert licence == (ROOT / "LICENSE").read_text() and "Apache License" in licence
    assert "orchestrator = orchestrator.cli.main:entry" in _entry_points(wheel, info)


def assert_migrations_shipped(wheel: Path) -> None:
    """The PostgreSQL schema's SQL files are package data: every one is in the wheel."""
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.endswith(".sql")}
    migrations = ROOT / "orchestrator" / "storage" / "postgres" / "migrations"
    expected = {p.relative_to(ROOT).as_posix() for p in migrations.glob("*.sql")}
    assert "orchestrator/storage/postgres/migrations/0001_schema_version.sql" in expected
    assert shipped == expected


def _entry_points(wheel: Path, info: str) -> str:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        return archive.read(f"{info}/entry_points.txt").decode()


def test_the_changelog_describes_this_version() -> None:
    from orchestrator import __version__

    headings = [
        line for line in (ROOT / "CHANGELOG.md").read_text().splitlines() if line.startswith("## ")
    ]
    assert headings and headings[0].startswith(f"## [{__version__}]"), headings


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_wheel_installed_elsewhere_runs_init_and_the_demo(tmp_path: Path) -> None:
    """Offline throughout: the wheel is built without build isolation (this
    environment's setuptools) and installed with --no-index --no-deps into a fresh venv
    that borrows this environment's installed dependencies through a .pth file."""
    wheels = tmp_path / "wheels"
    _run([
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--no-index", "--wheel-dir", str(wheels), str(_copy_source(tmp_path / "src")),
    ])  # fmt: skip
    [wheel] = wheels.glob("ticket_orchestrator-*.whl")
    assert_metadata(wheel)
    assert_migrations_shipped(wheel)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        ).stdout.strip()
    )
    # Appended after the venv's own site-packages: the installed wheel wins over this
    # checkout's editable install, and pydantic, GitPython... come from here.
    (site / "_borrowed_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([
        sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
        "--no-deps", "--no-index", str(wheel),
    ])  # fmt: skip

    work = tmp_path / "empty"
    work.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "ORCHESTRATOR_CONFIG", "ANTHROPIC_API_KEY", "VIRTUAL_ENV")
    }
    env["HOME"] = str(tmp_path / "home")
    orchestrator = str(venv / "bin" / "orchestrator")
    where = _run(
        [str(python), "-c", "import orchestrator; print(orchestrator.__file__)"], cwd=work, env=env
    )
    assert Path(where.stdout.strip()).is_relative_to(site), "not the installed wheel"

    init = _run([orchestrator, "init"], cwd=work, env=env)
    assert init.stdout.startswith(f"wrote {work / 'config.toml'}\n")
    assert (work / "config.toml").read_text() == (ROOT / "config.toml").read_text()
    assert (work / "tickets" / "EXAMPLE-1.md.example").is_file()

    demo = _run([orchestrator, "demo"], cwd=work, env=env)
    summary = demo.stdout.split("=== summary ===\n", 1)[1].splitlines()
    assert [line.split(" — ")[0] for line in summary[:3]] == [
        "  CARDS-1: exit 0: completed (or nothing to do)",
        "  CARDS-2: exit 0: completed (or nothing to do)",
        "  CARDS-3: exit 3: needs a human (halted with a typed reason, or blocked by DRY_RUN)",
    ]
    assert all(line.split(" — ")[1].startswith("as expected") for line in summary[:3])
    # The hint names the orchestrator that ran (it is not on PATH here).
    assert f"Every run:    {orchestrator} --state-dir .state/demo/state runs\n" in demo.stdout
    # The stage programs that ran were the wheel's, started as modules of the install.
    [clone_log] = (work / ".state" / "demo" / "state" / "runs").glob("CARDS-2-*/logs/001-clone.log")
    assert f"# $ {python} -P -m orchestrator.stages.clone" in clone_log.read_text()

    listing = _run(
        [orchestrator, "runs", "--json", "--state-dir", ".state/demo/state"], cwd=work, env=env
    )
    states = {
        row["ticket_id"]: row["state"] for row in map(json.loads, listing.stdout.splitlines())
    }
    assert states == {"CARDS-1": "completed", "CARDS-2": "completed", "CARDS-3": "needs-human"}
