#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# `ringlane-demo --role cluster`, driven through two FIFOs as docs/demo.md shows:
#  1. it says "ready bootstrap.servers=..." first, answers every line with exactly one line
#     ("ok ..." or "error ...": unknown and empty lines, a broker out of range, a topic that
#     exists, a line too long), nothing else on stdout, and "quit" ends it with status 0;
#  2. librdkafka's mock coordinator aborting, for real: a cooperative-sticky and a range
#     consumer (ringlane-demo --role consumer --assignor ...) join one group, the mock asserts
#     in rd_kafka_mock_cgrp_elect_leader, and the process says why on stderr before it dies
#     of SIGABRT (status 134); reading its stdout ends at once;
#  3. the same message for a SIGABRT sent from outside (the handler alone, whatever librdkafka
#     version runs);
#  4. the remedy docs/demo.md gives: kcat with -X partition.assignment.strategy=
#     cooperative-sticky joins the same group beside a demo consumer, gets its share of the
#     partitions, and the cluster lives on (skipped when kcat is not installed).
#
# Usage: tests/cluster/cluster_role.sh DEMO
# Waits are for events (a line, the end of a process), each bounded (60 s) only to end a hang.
set -u
demo="${1:?usage: cluster_role.sh DEMO}"
work=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "cluster_role: FAILED: $*"
    for f in "$work"/*.err "$work"/*.log; do
        [ -f "$f" ] && { echo "--- $f (last lines)"; tail -n 5 "$f"; }
    done
    exit 1
}

# start_cluster NAME: a cluster whose stdin and stdout are FIFOs held on descriptors 3 and 4
# (stderr to NAME.err); sets cluster_pid and servers.
start_cluster() {
    rm -f "$work/in" "$work/out"
    mkfifo "$work/in" "$work/out"
    "$demo" --role cluster <"$work/in" >"$work/out" 2>"$work/$1.err" &
    cluster_pid=$!
    pids="$pids $cluster_pid"
    exec 3>"$work/in" 4<"$work/out"
    IFS= read -r ready <&4 || fail "$1: no line at all from the cluster"
    case "$ready" in
    "ready bootstrap.servers="*) servers=${ready#ready bootstrap.servers=} ;;
    *) fail "$1: the first line is not the ready line: '$ready'" ;;
    esac
}

# answer LINE EXPECTED: sends LINE, reads one line, compares.
answer() {
    printf '%s\n' "$1" >&3
    IFS= read -r got <&4 || fail "no answer to '$1'"
    [ "$got" = "$2" ] || fail "'$1' was answered '$got', expected '$2'"
}

# ended PID: true when PID has exited (gone, or a zombie of ours).
ended() {
    ! kill -0 "$1" 2>/dev/null || [ "$(ps -o stat= -p "$1" | cut -c1)" = Z ]
}

# wait_end PID WHAT: waits up to 60 s for PID to end, then reaps it; sets status.
wait_end() {
    i=0
    until ended "$1"; do
        i=$((i + 1))
        [ "$i" -le 600 ] || fail "$2 did not end in 60 s"
        sleep 0.1
    done
    wait "$1"
    status=$?
}

usage="expected down N, up N (N = 1..3), topic NAME PARTITIONS or quit"

# --- 1. ready, one answer per line, quit ---
start_cluster replies
case "$servers" in
127.0.0.1:*,127.0.0.1:*,127.0.0.1:*) ;;
*) fail "ready line without three brokers: $ready" ;;
esac
answer "down 3" "ok down 3"
answer "up 3" "ok up 3"
answer "topic role.extra 2" "ok topic role.extra 2"
answer "topic role.extra 2" "error topic role.extra 2: Broker: Topic already exists"
answer "down 7" "error down 7: $usage"
answer "bogus" "error bogus: $usage"
answer "" "error (empty line): $usage"
long=$(printf '%0700d' 0)
answer "topic $long 1" "error topic $(printf '%034d' 0)...: line too long"
answer "up 1" "ok up 1"
answer "quit" "ok quit"
IFS= read -r extra <&4 && fail "a line after quit: '$extra'"
wait_end "$cluster_pid" "the cluster after quit"
[ "$status" -eq 0 ] || fail "the cluster ended with status $status after quit"
exec 3>&- 4<&-
echo "cluster_role: ready line first, one answer per line (10 lines), quit: status 0"

# --- 2. the mock's own abort: one group, two assignors ---
start_cluster mixed
for assignor in cooperative-sticky range; do
    "$demo" --role consumer --bootstrap-servers "$servers" --name "$assignor" \
        --assignor "$assignor" --session-timeout-ms 3000 --idle-exit 60 --no-progress \
        >"$work/consumer-$assignor.log" 2>&1 3>&- 4<&- &
    pids="$pids $!"
done
wait_end "$cluster_pid" "the cluster with a group of two assignors"
[ "$status" -eq 134 ] || fail "the cluster ended with status $status, expected 134 (SIGABRT)"
IFS= read -r extra <&4 && fail "a line from the dead cluster: '$extra'"
exec 3>&- 4<&-
grep -q "rd_kafka_mock_cgrp_elect_leader: Assertion" "$work/mixed.err" ||
    fail "not the mock coordinator's assertion"
grep -q "^ringlane-demo: aborted (SIGABRT) in a process hosting librdkafka's mock cluster\. The usual cause: a consumer group whose members use different partition\.assignment\.strategy values" "$work/mixed.err" ||
    fail "no message saying why"
echo "cluster_role: two assignors in one group: the mock asserted, the process said why, status 134"
echo "  $(grep -m1 Assertion "$work/mixed.err")"

# --- 3. SIGABRT from outside: the same message ---
start_cluster sigabrt
kill -ABRT "$cluster_pid"
wait_end "$cluster_pid" "the cluster after SIGABRT"
[ "$status" -eq 134 ] || fail "the cluster ended with status $status after SIGABRT, expected 134"
exec 3>&- 4<&-
grep -q "^ringlane-demo: aborted (SIGABRT) in a process hosting librdkafka's mock cluster" \
    "$work/sigabrt.err" || fail "no message after a SIGABRT from outside"
echo "cluster_role: SIGABRT from outside: the message, status 134"

# --- 4. kcat in the same group, with the group's strategy ---
if ! command -v kcat >/dev/null 2>&1; then
    echo "cluster_role: kcat not installed: the remedy is not tried"
    exit 0
fi
start_cluster kcat
"$demo" --role consumer --bootstrap-servers "$servers" --name demo-consumer \
    --session-timeout-ms 3000 --idle-exit 60 --no-progress >"$work/demo-consumer.log" 2>&1 \
    3>&- 4<&- &
pids="$pids $!"
kcat -b "$servers" -G ringlane-demo -X partition.assignment.strategy=cooperative-sticky \
    -X session.timeout.ms=3000 ringlane.events >/dev/null 2>"$work/kcat.log" 3>&- 4<&- &
pids="$pids $!"
# kcat holds 3 of the 6 partitions (assigned 3, or assigned 6 and then 3 revoked) only after
# an election with both members.
i=0
until grep -Eq "rebalanced: incremental (assignment|revoke) of 3 partition" "$work/kcat.log"; do
    ended "$cluster_pid" && fail "the cluster died with kcat in the group"
    i=$((i + 1))
    [ "$i" -le 600 ] || fail "kcat got no share of the partitions in 60 s"
    sleep 0.1
done
answer "down 2" "ok down 2" # alive, and answering
answer "quit" "ok quit"
wait_end "$cluster_pid" "the cluster after quit"
[ "$status" -eq 0 ] || fail "the cluster ended with status $status"
exec 3>&- 4<&-
echo "cluster_role: kcat with cooperative-sticky shared the group's partitions; no abort"
