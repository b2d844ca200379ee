#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The ring demo: route keys over a small cluster, see what a membership change moves, compare
# with modulo hashing, and spill a hot key with bounded loads. Usage: scripts/demo.sh [BUILD_DIR]
set -eu
bin="${1:-build}/tools/ringlane/ringlane"
[ -x "$bin" ] || { echo "demo: $bin is missing; run 'make demo'" >&2; exit 1; }

keys() { i=0; while [ "$i" -lt "$1" ]; do echo "user:$i"; i=$((i + 1)); done; }
say() { printf '\n== %s\n' "$*"; }

say "Route 5 keys over cache-a, cache-b, cache-c (cache-c has weight 2)"
keys 5 | "$bin" route --nodes cache-a,cache-b,cache-c=2

say "Each key's 2 replicas (the first 2 distinct nodes clockwise)"
keys 3 | "$bin" route --nodes cache-a,cache-b,cache-c=2 --replicas 2

say "cache-d joins: of 10,000 keys only those in cache-d's new arcs move, all to cache-d"
keys 10000 | "$bin" diff --from cache-a,cache-b,cache-c=2 --to cache-a,cache-b,cache-c=2,cache-d

say "cache-b leaves: only cache-b's keys move"
keys 10000 | "$bin" diff --from cache-a,cache-b,cache-c=2 --to cache-a,cache-c=2

say "Compare: 4 -> 5 partitions by ring, and by hash mod N (Kafka's default partitioners)"
keys 10000 | "$bin" diff --from 0,1,2,3 --to 0,1,2,3,4 | head -1 | sed 's/^/ring:   /'
# xmur3 is 32-bit, so awk's doubles compute h % 4 and h % 5 exactly.
"$bin" hash --hash xmur3 $(keys 10000) |
  awk '{ if ($1 % 4 != $1 % 5) m++ } END { printf "modulo: moved %d of %d\n", m, NR }'

say "Ring balance: arc share per node (8 nodes x 160 vnodes, default profile)"
"$bin" stats --nodes n0,n1,n2,n3,n4,n5,n6,n7

say "A hot key with bounded loads (c = 1.25): it spills over instead of melting one node"
i=0; while [ "$i" -lt 12 ]; do echo "hot-key"; i=$((i + 1)); done |
  "$bin" route --nodes cache-a,cache-b,cache-c --bounded 1.25 | sort | uniq -c | sort -rn

say "Profiles"
"$bin" profiles

say "The same weighted join under the profiles that reproduce other rings (10,000 keys)"
keys 10000 | "$bin" diff --profile default,ketama,envoy,groupcache,maglev \
  --from 10.0.0.1:11211,10.0.0.2:11211=2,10.0.0.3:11211=3 \
  --to 10.0.0.1:11211,10.0.0.2:11211=2,10.0.0.3:11211=3,10.0.0.4:11211
