#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The soak, not run by CI. Two parts, SECONDS each:
#
# 1. The dispatcher's order checker (many keys, a hot key, random handler failures, a lane change
#    every 50 ms): its counts and resident memory every 10 s. Order violations, losses and
#    duplicates must all be 0.
# 2. The whole pipeline: ringlane-demo on librdkafka's mock cluster, producing RATE events/s for
#    SECONDS, with its change script (add and remove a lane, stop and restart a consumer, a
#    broker down and up) repeated every CYCLE_SECONDS. Every 10 s: handled events, throughput,
#    duplicates, violations and resident memory. Order violations, overlaps and losses must be
#    0. Duplicates are printed, not failed: the pipeline is at-least-once, and the mock group
#    coordinator refuses a commit once any member has rejoined, so a revoke's commit can lose
#    that race and the next owner re-reads from the commit before (the demo names the cause).
#
# Either part fails when the largest resident memory of the run's last third exceeds the
# largest of its middle third by more than 10% (+1 MiB for the checker, +8 MiB for the
# pipeline): once warm it must stay flat. The pipeline's warm-up is long: the mock cluster
# keeps up to 100,000 messages or 5 MiB per partition and librdkafka's consumers prefetch, so
# its memory rises for the first minute or two; run it for 600 s (the default) to judge it.
#
# Usage: tests/soak/soak.sh [SECONDS (default 600)] [BUILD_DIR (default build)]
# Environment: RATE (events/s, default 10000), CYCLE_SECONDS (default 60), PROFILE (the ring
# profile of part 1, default jump: the one whose changes move the most keys), MODE (how part 1
# runs its jobs: dedicated, a worker thread per lane, the default; pool, 2 shared workers;
# async, the asynchronous handler; loopfed, one shared worker with the loop thread submitting
# too, so that the loop waits for completions).
set -eu
seconds="${1:-600}"
build="${2:-build}"
rate="${RATE:-10000}"
cycle_seconds="${CYCLE_SECONDS:-60}"
checker="$build/tests/test_dispatch_order"
demo="$build/examples/ringlane-demo"
for p in "$checker" "$demo"; do
    [ -x "$p" ] || { echo "soak: $p is missing: run 'make build' first" >&2; exit 2; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# rss_check LOG SLACK_KIB: the "rss_kib=N" fields of LOG's report lines. The largest of the
# last third must stay within 10% + SLACK_KIB of the largest of the middle third.
rss_check() {
    awk -v slack="$2" '
      / rss_kib=/ { for (i = 1; i <= NF; i++) if ($i ~ /^rss_kib=/) { split($i, kv, "="); rss[n++] = kv[2] } }
      END {
        if (n < 3) { print "soak: too short to judge memory"; exit 0 }
        a = int(n / 3); b = int(2 * n / 3); mid = 0; last = 0
        for (i = a; i < b; i++) if (rss[i] > mid) mid = rss[i]
        for (i = b; i < n; i++) if (rss[i] > last) last = rss[i]
        printf "soak: resident memory at most %d KiB in the middle third of the run, %d KiB in the last (first report %d KiB)\n", mid, last, rss[0]
        if (last > mid * 1.10 + slack) { print "soak: FAILED: resident memory grew"; exit 1 }
      }' "$1"
}

# --- part 1: the dispatcher ---
echo "soak 1/2: dispatcher order checker for ${seconds}s"
status=0
"$checker" --seconds "$seconds" --profile "${PROFILE:-jump}" --mode "${MODE:-dedicated}" | tee "$tmp/checker.log" || status=$?
# The checker prints "soak t=... rss_kib=N" lines, then its order-check summary.
if [ "$status" -ne 0 ] || ! grep -q '^order check' "$tmp/checker.log"; then
    echo "soak: FAILED: the dispatcher's order checker failed (violations, losses or duplicates)"
    failed=1
fi
rss_check "$tmp/checker.log" 1024 || failed=1

# --- part 2: the pipeline ---
messages=$((rate * seconds))
cycles=$((seconds / cycle_seconds))
[ "$cycles" -ge 1 ] || cycles=1
echo "soak 2/2: the pipeline on the mock cluster: $messages events at $rate/s, $cycles change cycles"
"$demo" --no-progress --rate "$rate" --messages "$messages" --cycles "$cycles" \
    >"$tmp/demo.out" 2>"$tmp/demo.err" &
pid=$!
start=$(date +%s)
last_handled=0
while kill -0 "$pid" 2>/dev/null; do
    sleep 10
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    [ -n "$rss" ] || break
    # The demo's last progress line: "... produced P  handled H  dup D  violations V ..."
    line=$(grep -a 'handled' "$tmp/demo.err" | tail -n 1 || true)
    # shellcheck disable=SC2046 # three numbers, split on purpose
    set -- $(echo "$line" | awk '{ h = 0; d = 0; v = 0
        for (i = 1; i < NF; i++) {
            if ($i == "handled") h = $(i + 1); if ($i == "dup") d = $(i + 1)
            if ($i == "violations") v = $(i + 1) }
        print h, d, v }')
    handled=${1:-0} dup=${2:-0} viol=${3:-0}
    echo "soak t=$(($(date +%s) - start))s handled=$handled per_s=$(((handled - last_handled) / 10))" \
        "dup=${dup:-0} violations=${viol:-0} rss_kib=$rss" | tee -a "$tmp/pipeline.log"
    last_handled=$handled
done
status=0
wait "$pid" || status=$?
grep -a -v '^\[' "$tmp/demo.err" >&2 || true
sed -n '/^== ringlane demo/,$p' "$tmp/demo.out"
if [ "$status" -ne 0 ]; then
    echo "soak: FAILED: the pipeline reported order violations, overlaps or losses (exit $status)"
    failed=1
fi
rss_check "$tmp/pipeline.log" 8192 || failed=1

if [ "$failed" -ne 0 ]; then
    echo "soak: FAILED"
    exit 1
fi
echo "soak: passed (dispatcher: 0 violations, losses, duplicates; pipeline: 0 violations," \
    "overlaps, losses; memory flat)"
