#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Instructions per job under callgrind: the dispatcher fed from the loop thread against
# uv_queue_work, one worker, empty jobs. Each kind runs twice (N and 2N jobs); the difference
# over N is the cost of one job, without start-up and calibration. Callgrind runs one thread at
# a time, so a worker that spins waiting for work spins until its time slice ends, and the loop
# waiting for a next completion waits out its time: the dispatcher's waiting loops
# (rl__spin_until, rl__wait_for_completion) are printed apart, and the figure without them is
# the work a job costs.
#
# Usage: bench/instructions_per_job.sh [BUILD_DIR (default build)] [N (default 50000)]
set -eu
build="${1:-build}"
n="${2:-50000}"
bench="$build/bench/bench_dispatch"
[ -x "$bench" ] || { echo "instructions_per_job: $bench is missing: run 'make build'" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "instructions_per_job: valgrind is not installed" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# total KIND JOBS: instructions of one run; also leaves its profile in $tmp/KIND.JOBS
total() {
    UV_THREADPOOL_SIZE=1 valgrind --tool=callgrind --callgrind-out-file="$tmp/$1.$2" \
        "$bench" one "$1" 1 0 "$2" >/dev/null 2>&1
    awk '/^summary:/ { print $2 }' "$tmp/$1.$2"
}
# spin KIND JOBS: instructions inside the waiting loops (0 when they never ran)
spin() {
    callgrind_annotate --inclusive=yes --threshold=100 "$tmp/$1.$2" 2>/dev/null |
        awk '/rl__spin_until|rl__wait_for_completion/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }'
}

printf '%-16s %12s %12s %12s\n' kind "instr/job" "spin/job" "work/job"
base=""
for kind in uv_queue_work loopfed uv_batched loopfed_batched; do
    a=$(total "$kind" "$n")
    b=$(total "$kind" $((2 * n)))
    sa=$(spin "$kind" "$n")
    sb=$(spin "$kind" $((2 * n)))
    line=$(awk -v a="$a" -v b="$b" -v sa="$sa" -v sb="$sb" -v n="$n" 'BEGIN {
        per = (b - a) / n; sp = (sb - sa) / n; printf "%.1f %.1f %.1f", per, sp, per - sp }')
    set -- $line
    printf '%-16s %12s %12s %12s' "$kind" "$1" "$2" "$3"
    [ -n "$base" ] || base=$3
    awk -v w="$3" -v b="$base" 'BEGIN { printf "   %.2fx uv_queue_work\n", w / b }'
done
