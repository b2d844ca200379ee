#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# check_records must be able to fail: a small run written by hand passes, and each fault put
# into it (an event never handled, a key out of order, a commit past an unhandled event, a
# duplicate with no kill to explain it, a record that is not what was produced, no kill at
# all, a key's later event begun in another partition before its earlier one ended) makes it
# fail with its own report line.
#
# Usage: tests/cluster/check_records_selftest.sh CHECK_RECORDS
set -u
check="${1:?usage: check_records_selftest.sh CHECK_RECORDS}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# The run: four events on partition 0. consumer-1 (pid 100) handles offsets 0..2, sees 0..1
# committed, and is killed; consumer-2 (pid 200) starts at the commit, handles 2 again (a
# duplicate after the kill) and 3, commits 4 and is revoked.
write_run() {
    cat >"$work/produced" <<'EOF'
N 1 producer 50
P 1 user:0 0 0 0
P 2 user:0 1 0 1
P 3 user:1 0 0 2
P 4 user:0 2 0 3
EOF
    echo "kill consumer-1 100 1.0" >"$work/kills"
    cat >"$work/c1" <<'EOF'
N 5 consumer-1 100
A 10 0 1
H 11 user:0 0 0 0 1
H 12 user:0 1 0 1 1
C 13 0 2
H 14 user:1 0 0 2 1
EOF
    cat >"$work/c2" <<'EOF'
N 6 consumer-2 200
A 20 0 1
H 21 user:1 0 0 2 1
H 22 user:0 2 0 3 1
C 23 0 4
R 24 0
EOF
}

# expect STATUS PATTERN WHAT: runs the checker on the files as they are now.
expect() {
    "$check" ${FLAGS:-} "$work/produced" "$work/kills" "$work/c1" "$work/c2" >"$work/out" 2>&1
    status=$?
    if [ "$status" -ne "$1" ] || ! grep -q "$2" "$work/out"; then
        echo "FAILED: $3: exit $status (expected $1), output:"
        cat "$work/out"
        failed=1
    else
        echo "ok: $3"
    fi
}

write_run
expect 0 "duplicates          1: 1 after a kill" "the run as written passes, one duplicate after the kill"

write_run
sed -i '/^H 22/d; s/^C 23 0 4/C 23 0 3/' "$work/c2"
expect 1 "lost                1" "an event nobody handled"

write_run
sed -i 's/^H 11 user:0 0 0 0 1/H 11 user:0 1 0 1 1/; s/^H 12 user:0 1 0 1 1/H 12 user:0 0 0 0 1/' \
    "$work/c1"
expect 1 "user:0 at offset 0 after offset 1" "a key's events out of order in one assignment"

write_run
sed -i 's/^C 13 0 2/C 13 0 3/' "$work/c1"
expect 1 "passed an event not handled" "a commit before its event was handled"

write_run
echo "kill consumer-3 300 1.0" >"$work/kills"
expect 1 "duplicate without a cause" "a duplicate after a process that was not killed"

write_run
sed -i 's/^H 22 user:0 2 0 3 1/H 22 user:0 7 0 3 1/' "$work/c2"
expect 1 "but the producer put user:0 2 there" "a record that is not what was produced"

# A copy of offset 3 at offset 4, which the producer never had acknowledged (a retried
# request appended twice): handled in log order, it passes; a copy of nothing does not.
write_run
sed -i 's/^C 23 0 4/H 23 user:0 2 0 4 1\nC 24 0 5/; s/^R 24 0/R 25 0/' "$work/c2"
expect 0 "copies              1 events" "a copy the cluster holds, handled in log order"
sed -i 's/^H 23 user:0 2 0 4 1/H 23 user:0 3 0 4 1/' "$work/c2"
expect 1 "handled what was never produced there" "a record of an event never acknowledged"

write_run
: >"$work/kills"
sed -i '/^H 21/d' "$work/c2"
sed -i 's/^H 14 user:1 0 0 2 1/H 12 user:1 0 0 2 1/; s/^H 12 user:0 1/H 11 user:0 1/' "$work/c1"
expect 1 "(0 killed with SIGKILL" "a run without a kill proves nothing about kills"

# A growth: user:0's next event, seq 3, went to a new partition 1, which consumer-2 also
# holds; its H line says when it began (the last field). Begun after seq 2 ended (22): order
# holds. Begun at 15, while seq 2 had not been handled anywhere yet: the order across
# partitions is broken, which --count-across counts without failing.
write_run
echo "P 5 user:0 3 1 0" >>"$work/produced"
sed -i 's/^A 20 0 1/A 20 0 1\nA 20 1 1/; s/^R 24 0/H 30 user:0 3 1 0 1 29\nC 31 1 1\nR 32 0\nR 32 1/' \
    "$work/c2"
expect 0 "order across        0" "a moved key's next event begun after its earlier one ended"
sed -i 's/^H 30 user:0 3 1 0 1 29/H 30 user:0 3 1 0 1 15/' "$work/c2"
expect 1 "user:0 seq 3 (partition 1 offset 0) began 0.000 s before seq 2" \
    "a moved key's next event begun before its earlier one ended"
FLAGS=--count-across expect 0 "order across        1" "--count-across counts it without failing"

exit "$failed"
