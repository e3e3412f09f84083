#!/bin/bash
# Run one bench script in two trees, alternated, so "not slower than before" is measured in one
# run on the same machine (docs/performance.md, "How figures are measured").
#
#   bench/ab_trees.sh BEFORE_TREE ROUNDS bench/core_bench.py [args...]
#
# BEFORE_TREE is a checkout of the older commit (e.g. `git worktree add /tmp/before 72ee0ca`);
# it runs with its own core/, plugins/ and contrib/ first on PYTHONPATH and this tree's python.
# Each round runs the before tree, then this one, and prints the time and load of each run.
set -euo pipefail
before=$(cd "$1" && pwd); rounds=$2; shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
for round in $(seq "$rounds"); do
  for tree in before this; do
    echo "=== $tree round $round $(date +%T) load $(cut -d' ' -f1 /proc/loadavg): $*"
    if [ "$tree" = before ]; then
      (cd "$before" && PYTHONPATH="$before/core:$before/plugins:$before/contrib" "$py" "$@")
    else
      (cd "$here" && "$py" "$@")
    fi
  done
done
