#!/usr/bin/env bash
# The shared side-by-side harness (../shared/bench/run.sh: panes, plain PySpark and PyFlink on the same
# Nexmark files) with panes' side taken from benchmarks/panes_nexmark.py, which ends the input
# (`end_input`) so that panes gives the complete answer. run.sh runs the scripts beside it, so they are
# linked, not copied, into one directory: every other file is the shared one. Arguments and variables
# are run.sh's (REPS, DATA, QS, SYSTEMS, WORK).
set -eu
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SHARED="${SHARED_BENCH:-$ROOT/../shared/bench}"
[ -x "$SHARED/run.sh" ] || [ -f "$SHARED/run.sh" ] || { echo "error: no shared harness at $SHARED (set SHARED_BENCH)" >&2; exit 2; }
# (outside the project: its type checker would find panes_nexmark.py twice)
HARNESS="${WORK:-$HOME/.cache/panes-bench}/harness"
mkdir -p "$HARNESS"
for f in run.sh nexmark_gen.py spark_nexmark.py flink_nexmark.py; do ln -sfn "$(cd "$SHARED" && pwd)/$f" "$HARNESS/$f"; done
ln -sfn "$ROOT/benchmarks/panes_nexmark.py" "$HARNESS/panes_nexmark.py"
cd "$ROOT"
exec bash "$HARNESS/run.sh" "$@"
