#!/usr/bin/env bash
# Developer entry point. Every subcommand that needs the environment runs `setup` first,
# so a fresh machine with only python3 and git needs nothing but these commands.
#   setup                   create .venv (if absent) and install the project with its test deps
#   test [pytest args]      run the test suite
#   demo                    build the demo project and run its tickets through the pipeline
#   bench                   run the benchmarks in bench/
#   lint-bug-commit-order   review check, run inside a clone (see README)
#   corpus [DIR]            build the labelled failure corpus (default ./eval-corpus) by
#                           running real tools on tiny projects, for `orchestrator eval`
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
STAMP="$VENV/.orchestrator-installed"

setup() {
    if [ ! -x "$PY" ]; then
        python3 -m venv "$VENV"
    fi
    # Reinstall only when pyproject.toml changed since the last install: keeps `setup` quick.
    if [ ! -f "$STAMP" ] || [ "$ROOT/pyproject.toml" -nt "$STAMP" ]; then
        "$PY" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,distributed]"
        touch "$STAMP"
    fi
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    setup)
        setup
        ;;
    test)
        setup
        cd "$ROOT"
        # The suite must never reach a real model: no key is passed down, whatever the shell has.
        exec env -u ANTHROPIC_API_KEY -u ANTHROPIC_AUTH_TOKEN "$PY" -m pytest -q "$@"
        ;;
    demo)
        setup
        cd "$ROOT"
        exec "$PY" -m orchestrator.demo "$@"
        ;;
    bench)
        # Every benchmark in bench/ (args such as --quick go to each); each prints its
        # ratios against a baseline measured in the same run.
        setup
        cd "$ROOT"
        status=0
        for bench in bench/run.py bench/bench_*.py; do
            echo "=== $bench"
            "$PY" "$bench" "$@" || status=1
        done
        exit $status
        ;;
    lint-bug-commit-order)
        # Runs inside the clone (the current directory); needs the orchestrator's venv only
        # for GitPython, so it does not run `setup` (a check must not install anything).
        if [ -x "$PY" ]; then
            exec "$PY" -m orchestrator.stages.checks.commit_order "$@"
        fi
        # No venv: the package is not installed anywhere, so point python3 at this checkout.
        export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
        exec python3 -m orchestrator.stages.checks.commit_order "$@"
        ;;
    corpus)
        # No cd: DIR is relative to where the command is run, as `orchestrator eval --corpus`.
        setup
        exec env PYTHONPATH="$ROOT/tests" "$PY" -m corpus.build "${1:-eval-corpus}"
        ;;
    *)
        echo "usage: bash scripts/dev.sh {setup|test|demo|bench|lint-bug-commit-order|corpus}" >&2
        exit 2
        ;;
esac
