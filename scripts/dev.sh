#!/usr/bin/env bash
# Developer entry point. Every subcommand that needs the environment runs `setup` first,
# so a fresh machine with only python3 and git needs nothing but these commands.
#   setup                   create .venv (if absent) and install the project with its test deps
#   test [--quick] [pytest args]
#                           run the test suite: all of it (what CI runs), or with --quick
#                           the edit loop's tier (no test marked slow, fewer Hypothesis
#                           examples); in $TEST_WORKERS pytest-xdist workers (default:
#                           three times the cores, 6 on CI's two)
#   test-under-load [RUNS] [pytest args]
#                           the full suite RUNS times in a row (default 3) with two CPU-bound
#                           busy processes alongside, started and stopped here; stops at the
#                           first failing run
#   demo                    build the demo project and run its tickets through the pipeline
#   bench                   run the benchmarks in bench/
#   lint-bug-commit-order   review check, run inside a clone (see README)
#   corpus [DIR]            build the labelled failure corpus (default ./eval-corpus) by
#                           running real tools on tiny projects, for `orchestrator eval`
#   redis [stop|status]     start (or stop) a local redis-server for trying the distributed
#                           mode: loopback only, port $REDIS_PORT (default 6379), data and
#                           log in $ORCHESTRATOR_REDIS_DIR (default ~/.cache/orchestrator/redis)
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
        # pip compiles what it installs one file at a time (16 s of a 46 s install here);
        # compileall does the same on every core (3 s), so CI's set-up is shorter.
        "$PY" -m pip install --quiet --disable-pip-version-check --no-compile -e "$ROOT[test,distributed,docs,postgres]"
        "$PY" -m compileall -q -j 0 "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null \
            || echo "note: some installed files do not compile (pip skips those too); they load from source" >&2
        touch "$STAMP"
    fi
}

# The tiers. Most tests wait on the processes they start, so more workers than cores keep
# them busy (measured on two: 552 s in one process, 406 s with two workers, 215 s with
# four; the whole suite of 4,464 tests later in 558 s with four, 543 s with six).
# Worksteal: the few long end-to-end tests would otherwise leave a worker idle at the end.
#
# The suite's temp files go to memory (/dev/shm) when it has room and TMPDIR is not set:
# its thousands of durable writes (fsync a file, then its directory) wait on no disk
# there. Measured on two cores: 458 s against 494 s, /dev/shm peaking at 0.9 GB. The
# writes are the same calls; only the disk's latency is gone. A small /dev/shm (a
# container's default is 64 MiB) keeps the usual temp dir.
SUITE_TMP_MIN_MB=4096
# What to undo when this script ends, however it ends (a failing run, Ctrl-C): memory
# is not given back by itself, and test-under-load's busy loops must stop.
SUITE_TMPS=()
BUSY_PIDS=()
on_exit() {
    [ "${#BUSY_PIDS[@]}" -eq 0 ] || kill "${BUSY_PIDS[@]}" 2>/dev/null || true
    [ "${#SUITE_TMPS[@]}" -eq 0 ] || rm -rf "${SUITE_TMPS[@]}"
}
trap on_exit EXIT

suite_tmpdir() {
    [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] || return 1
    local free_mb
    free_mb="$(df -Pm /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')"
    [ -n "$free_mb" ] && [ "$free_mb" -ge "$SUITE_TMP_MIN_MB" ] || return 1
    local made
    made="$(mktemp -d /dev/shm/orchestrator-tests.XXXXXX)" || return 1
    # As /tmp is: the tests hand directories under it to another user (PostgreSQL runs as
    # nobody under root), who must reach them; mktemp's 0700 would stop it at the door.
    chmod 1777 "$made"
    echo "$made"
}

# pytest rewrites each test module's asserts before importing it and keeps the result in
# __pycache__, unless PYTHONDONTWRITEBYTECODE is set (CI's machines set it): then every
# xdist worker rewrote all 320 modules at every run, 10 s of CPU each of the four (13.6 s
# to collect the suite uncached, 4 s cached). Written here first, in two processes of
# half the files each; the workers read it (reading is allowed with the variable set).
# Where the variable is unset the workers write it themselves, and nothing is done here.
# Only the files whose rewritten copy is missing or out of date (pytest keeps the source's
# hash in it, bytes 8-16, and checks it the same way): in the edit loop that is the few
# just edited, or none. Each file is rewritten by pytest's own functions, as its import
# hook does (the only setting that changes the result, enable_assertion_pass_hook, is
# not set here), without importing the module: a `pytest --collect-only` of the same
# files also imported every test module and what it imports, 26 s of CPU on a fresh
# clone against 8.5 s for the rewriting alone. Should those functions move in a later
# pytest, a collect of the stale files writes them as before.
warm_rewrite_cache() {
    [ -n "${PYTHONDONTWRITEBYTECODE:-}" ] || return 0
    local part pids=()
    for part in 0 1; do
        (cd "$ROOT" && "$PY" - "$part" 2 <<'REWRITE'
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

part, parts = int(sys.argv[1]), int(sys.argv[2])
tag = f"{sys.implementation.cache_tag}-pytest-{importlib.metadata.version('pytest')}"
stale = []
for source in sorted(Path("tests").rglob("test_*.py")):
    if "__pycache__" in source.parts:
        continue
    rewritten = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
    try:
        header = rewritten.read_bytes()[:16]
    except OSError:
        header = b""
    if header[8:16] != importlib.util.source_hash(source.read_bytes())[:8]:
        stale.append(source)
mine = stale[part::parts]
if not mine:
    raise SystemExit(0)
try:
    from _pytest.assertion.rewrite import _rewrite_test, _write_pyc_fp
except ImportError:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         *map(str, mine)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    raise SystemExit(0)
for source in mine:
    source = source.resolve()
    try:
        source_hash, code = _rewrite_test(source, None)
    except SyntaxError:
        continue  # reported by the run itself, as an import error of the module
    rewritten = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
    rewritten.parent.mkdir(exist_ok=True)
    partial = rewritten.with_name(f"{rewritten.name}.{os.getpid()}")
    with open(partial, "wb") as fp:
        _write_pyc_fp(fp, source_hash, code)
    partial.replace(rewritten)
REWRITE
        ) &
        pids+=("$!")
    done
    # These two by pid: a bare `wait` would also wait for test-under-load's busy loops,
    # which never end. A module that fails to rewrite is reported by the run itself.
    wait "${pids[@]}" || true
}

run_tests() {
    local tier=full
    local args=()
    for arg in "$@"; do
        case "$arg" in
            --quick) tier=quick ;;
            *) args+=("$arg") ;;
        esac
    done
    local selection=() goal_s=$FULL_GOAL_S name="full suite"
    if [ "$tier" = quick ]; then
        selection=(-m "not slow or quick")
        goal_s=$QUICK_GOAL_S name="quick tier"
    fi
    local started load
    started="$(clock_s)"
    load="$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")"
    # The suite starts the orchestrator (and the tests' helper scripts) in some hundreds of
    # processes. Compiled once here, each loads the bytecode; where PYTHONDONTWRITEBYTECODE
    # is set (CI's machines set it) each would otherwise compile the package from source
    # again: about 0.4 s of CPU a process, a tenth of the suite's. Up to date, this takes
    # a tenth of a second.
    "$PY" -m compileall -q "$ROOT/orchestrator" "$ROOT/tests" >/dev/null
    warm_rewrite_cache
    local tmp_env=() memory_tmp status=0
    if memory_tmp="$(suite_tmpdir)"; then
        tmp_env=(TMPDIR="$memory_tmp")
        SUITE_TMPS+=("$memory_tmp")
    fi
    # The suite must never reach a real model: no key is passed down, whatever the shell has.
    # The user's own arguments come last: a -n or -m of theirs wins.
    env -u ANTHROPIC_API_KEY -u ANTHROPIC_AUTH_TOKEN ORCHESTRATOR_TEST_TIER="$tier" "${tmp_env[@]}" \
        "$PY" -m pytest -q -n "${TEST_WORKERS:-$("$PY" -c 'import os; print(3 * (os.cpu_count() or 1))')}" --dist worksteal "${selection[@]}" "${args[@]}" \
        || status=$?
    [ -z "$memory_tmp" ] || rm -rf "$memory_tmp"  # each run's own, now (a loaded series runs several)
    tier_time "$name" "$started" "$goal_s" "$load"
    return "$status"
}

# The tiers' goals on two idle cores, printed against what each run took, from this script's
# start (set-up included: pip when pyproject.toml changed, compiling, the rewrite cache) to
# the tests' end. The quick tier is the edit loop's; the full suite is CI's.
QUICK_GOAL_S=120
FULL_GOAL_S=600
SETUP_STARTED=""

clock_s() {
    date +%s.%N
}

tier_time() {
    local name="$1" started="$2" goal_s="$3" load="$4"
    awk -v name="$name" -v began="${SETUP_STARTED:-$started}" -v started="$started" \
        -v ended="$(clock_s)" -v goal="$goal_s" -v load="$load" 'BEGIN {
            took = ended - began
            printf "%s: %.0f s (goal %d s on two idle cores: %s), set-up %.0f s of it; load average %s at its start\n",
                name, took, goal, (took <= goal ? "met" : "MISSED"), started - began, load
        }'
}

# Flakiness is found under load, not on an idle machine: two busy loops take both cores'
# spare time while the full suite runs, RUNS times in a row. They are stopped however
# this ends (a failing run, Ctrl-C).
test_under_load() {
    local runs=3
    if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
        runs="$1"
        shift
    fi
    for _ in 1 2; do
        "$PY" -c "while True: pass" &
        BUSY_PIDS+=("$!")  # stopped by on_exit
    done
    echo "two busy processes running alongside: pids ${BUSY_PIDS[*]}"
    local run started status
    for run in $(seq "$runs"); do
        started=$SECONDS
        echo "=== loaded run $run of $runs"
        status=0
        SUITE_CLOCK_BUSY_PROCESSES=${#BUSY_PIDS[@]} run_tests "$@" || status=$?
        echo "=== loaded run $run of $runs: exit $status after $((SECONDS - started)) s"
        if [ "$status" -ne 0 ]; then
            return "$status"
        fi
    done
    echo "=== $runs loaded runs in a row passed"
}

# A local redis-server for a person trying the distributed mode (the tests start their own).
redis_local() {
    local action="${1:-start}"
    local port="${REDIS_PORT:-6379}"
    local dir="${ORCHESTRATOR_REDIS_DIR:-$HOME/.cache/orchestrator/redis}"
    local pidfile="$dir/redis-$port.pid"
    local running=""
    if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
        running="$(cat "$pidfile")"
    fi
    case "$action" in
        stop)
            if [ -z "$running" ]; then
                echo "no redis-server of ours is running on port $port"
                return 0
            fi
            kill "$running"
            # Redis writes its append-only file and exits; wait for that, boundedly.
            for _ in $(seq 100); do
                kill -0 "$running" 2>/dev/null || break
                sleep 0.1
            done
            if kill -0 "$running" 2>/dev/null; then
                echo "redis-server (pid $running) is still shutting down; see $dir/redis-$port.log" >&2
                return 1
            fi
            echo "stopped redis-server (pid $running) on 127.0.0.1:$port; its data stays in $dir"
            return 0
            ;;
        status)
            if [ -n "$running" ]; then
                echo "redis-server (pid $running) is running on 127.0.0.1:$port, data in $dir"
            else
                echo "no redis-server of ours is running on port $port"
                return 1
            fi
            return 0
            ;;
        start) ;;
        *)
            echo "usage: bash scripts/dev.sh redis [start|stop|status]" >&2
            return 2
            ;;
    esac
    if [ -n "$running" ]; then
        echo "redis-server (pid $running) is already running on 127.0.0.1:$port, data in $dir"
    else
        if ! command -v redis-server >/dev/null 2>&1; then
            echo "redis-server is not installed: install it first (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis)" >&2
            return 1
        fi
        mkdir -p "$dir"
        chmod 700 "$dir"
        # Loopback only; appendonly keeps leases and budgets across a restart of Redis.
        redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" --appendonly yes \
            --daemonize yes --pidfile "$pidfile" --logfile "$dir/redis-$port.log" >/dev/null
        "$PY" - "$port" <<'PING'
import sys, time
import redis
client = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), socket_connect_timeout=1)
deadline = time.monotonic() + 10
while True:
    try:
        client.ping()
        break
    except redis.exceptions.ConnectionError as exc:
        if time.monotonic() > deadline:
            sys.exit(f"redis-server did not answer on 127.0.0.1:{sys.argv[1]}: {exc}")
        time.sleep(0.05)
PING
        if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
            echo "redis-server did not stay up on 127.0.0.1:$port (is the port taken?); its log:" >&2
            tail -n 5 "$dir/redis-$port.log" >&2
            return 1
        fi
        echo "redis-server (pid $(cat "$pidfile")) is running on 127.0.0.1:$port, data and log in $dir"
    fi
    echo "use it:  export ORCHESTRATOR_BROKER_URL=redis://127.0.0.1:$port/0"
    echo "stop it: bash scripts/dev.sh redis stop   (or: kill \$(cat $pidfile))"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
    setup)
        setup
        ;;
    test)
        SETUP_STARTED="$(clock_s)"
        setup
        cd "$ROOT"
        run_tests "$@"
        ;;
    test-under-load)
        setup
        cd "$ROOT"
        test_under_load "$@"
        ;;
    demo)
        setup
        cd "$ROOT"
        exec "$PY" -m orchestrator demo "$@"
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
    redis)
        setup
        redis_local "$@"
        ;;
    *)
        echo "usage: bash scripts/dev.sh {setup|test|test-under-load|demo|bench|lint-bug-commit-order|corpus|redis}" >&2
        exit 2
        ;;
esac
