#!/usr/bin/env bash
# The full benchmark run behind docs/benchmarks.md.
#   bench/run_full.sh [extra args for python -m bench, e.g. --quick --out DIR]
#   EXPERIMENTS="exp2 latency" bench/run_full.sh     # a subset
#   EXPERIMENTS="kvs1 kvs2 exp4" bench/run_full.sh   # the store experiments (docs/benchmarks-stores.md)
#   EXPERIMENTS="spark-batch spark-growth spark-stream" bench/run_full.sh  # docs/benchmarks-spark.md
#   MTA_FROM=/path/to/dir bench/run_full.sh          # engines from DIR/mta instead of the working tree
# The engine sources (mta/), stores/, spark_ops/ and this driver (bench/) are first copied to a
# snapshot directory and every experiment runs from there, each in its own
# process, one after the other: all four measure the same code even if the
# working tree changes during the (long) run.  Results and logs go to
# bench/results (or --out); each JSON records the commit and a digest of the
# mta sources.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$root/.venv/bin/python"
out="$root/bench/results"
args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--out" ]; then out=$(realpath -m "$2"); shift 2; else args+=("$1"); shift; fi
done
snap=$(mktemp -d /tmp/mta-bench-snapshot.XXXXXX)
trap 'rm -rf "$snap"' EXIT
cp -r "${MTA_FROM:-$root}/mta" "$snap/"
cp -r "$root/stores" "$snap/"  # the store experiments (kvs1, kvs2, exp4)
cp -r "$root/spark_ops" "$snap/"  # the Spark experiments
cp -r "$root/bench" "$snap/"
cp "$root/.gitignore" "$snap/"  # so that git status in the snapshot ignores __pycache__
ln -s "$root/.git" "$snap/.git"  # git rev-parse / status for the JSON's commit info
rm -rf "$snap/bench/results"
mkdir -p "$out"
echo "==> snapshot of mta/ and bench/ in $snap (commit $(git -C "$root" rev-parse --short HEAD))" >&2
cd "$snap"
export PYTHONPATH="$snap${PYTHONPATH:+:$PYTHONPATH}"  # Spark's Python workers import the snapshot too
for exp in ${EXPERIMENTS:-exp1 exp2 exp3 latency}; do
  echo "==> $(date -u +%FT%TZ) python -m bench $exp ${args[*]-} --out $out (in the snapshot)" >&2
  "$py" -m bench "$exp" ${args[@]+"${args[@]}"} --out "$out" 2>&1 | tee "$out/$exp.log"
done
echo "==> $(date -u +%FT%TZ) done" >&2
