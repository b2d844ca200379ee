#!/bin/sh
# The soak: runs the dispatcher's order checker (many keys, a hot key, random handler failures,
# a lane change every 50 ms) for SECONDS and prints its counts and resident memory every 10 s.
# Fails when any order violation, loss or duplicate shows, or when resident memory grows by
# more than 10% (+1 MiB) between the first report and the last: it must stay flat.
# Not run by CI. Usage: tests/soak/soak.sh [SECONDS (default 600)] [BUILD_DIR (default build)]
set -eu
seconds="${1:-600}"
build="${2:-build}"
checker="$build/tests/test_dispatch_order"
[ -x "$checker" ] || { echo "soak: $checker is missing: run 'make build' first" >&2; exit 2; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "soak: dispatcher order checker for ${seconds}s"
status=0
"$checker" --seconds "$seconds" | tee "$log" || status=$?

# The checker prints "soak t=... rss_kib=N" lines, then its order-check summary.
awk -v status="$status" '
  /^soak t=/ { for (i = 1; i <= NF; i++) if ($i ~ /^rss_kib=/) { split($i, kv, "="); rss[n++] = kv[2] } }
  /order check:/ { summary = $0 }
  END {
    if (summary == "") { print "soak: FAILED: no order-check summary"; exit 1 }
    if (status != 0) { print "soak: FAILED: the order checker failed"; exit 1 }
    if (n >= 2) {
      first = rss[0]; last = rss[n - 1]
      printf "soak: resident memory %d KiB at the first report, %d KiB at the last\n", first, last
      if (last > first * 1.10 + 1024) { print "soak: FAILED: resident memory grew"; exit 1 }
    }
    print "soak: passed (0 violations, 0 losses, 0 duplicates; memory flat)"
  }' "$log"
