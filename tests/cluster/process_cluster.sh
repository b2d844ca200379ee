#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The demo cluster as processes, the topology of docker-compose.yml without Docker:
# librdkafka's mock cluster in a process of its own (ringlane-demo --role cluster, 3 brokers on
# 127.0.0.1), one producer process and three consumer processes of one group. While events
# flow, consumers are killed with SIGKILL at moments drawn from SEED and started again, and
# broker 3 is taken down and up. Every process writes what it produced, handled and saw
# committed (--record); at the end check_records, which shares no code with the demo, merges
# the files and proves per-key order in every process, that every acknowledged event was
# handled at least once, that no acknowledged commit passed an event not yet handled, and
# that every duplicate follows a kill, a refused commit or a revoke (it counts them).
#
# A fourth consumer, on an empty topic with --idle-exit 1, must end by itself.
#
# Usage: tests/cluster/process_cluster.sh DEMO CHECK_RECORDS
#        (DEMO: build/examples/ringlane-demo; CHECK_RECORDS: build/tests/cluster/check_records)
# Environment: SEED (16), MESSAGES (42000), RATE (events/s, 1500), KILLS (4),
#   OFFSET_MAP_MAX_BYTES (the consumers' --offset-map-max-bytes; 0 turns the offset map off),
#   KEEP=1 keeps the work directory (its path is printed) for a look at the files.
# Loopback only; about 40 s. Timing never decides the verdict: the drain's deadline (90 s)
# only ends a run that lost events, which check_records then reports.
set -u
demo="${1:?usage: process_cluster.sh DEMO CHECK_RECORDS}"
check="${2:?usage: process_cluster.sh DEMO CHECK_RECORDS}"
seed="${SEED:-16}"
messages="${MESSAGES:-42000}"
rate="${RATE:-1500}"
kills="${KILLS:-4}"
map_opt=""
[ -n "${OFFSET_MAP_MAX_BYTES:-}" ] && map_opt="--offset-map-max-bytes $OFFSET_MAP_MAX_BYTES"
keys=300
group=ringlane-cluster
work=$(mktemp -d)
start=$(date +%s.%N)

cluster_pid=""
producer_pid=""
idle_pid=""
pid_1=""
pid_2=""
pid_3=""
. "$(dirname "$0")/cluster_lib.sh"
trap 'cleanup_run process_cluster $pid_1 $pid_2 $pid_3 $producer_pid $idle_pid $cluster_pid' EXIT
trap 'exit 1' INT TERM

# --- the cluster ---
cluster_start "$demo" "$group"
say "cluster: $servers (pid $cluster_pid)"
cluster_cmd "topic ringlane.idle 1"

# --- the processes ---
# start_consumer N: consumer-N's next incarnation, with a record file of its own.
inc_1=0
inc_2=0
inc_3=0
start_consumer() {
    eval "inc=\$((inc_$1 + 1)); inc_$1=\$inc"
    "$demo" --role consumer --bootstrap-servers "$servers" --group "$group" --name "consumer-$1" \
        --keys "$keys" --session-timeout-ms 3000 --no-progress $map_opt \
        --record "$work/consumer-$1.$inc.rec" >>"$work/consumer-$1.log" 2>&1 3>&- 4<&- &
    eval "pid_$1=\$!"
    say "start consumer-$1 (incarnation $inc, pid $!)"
}
: >"$work/kills"
kill_consumer() {
    eval "p=\$pid_$1"
    kill -9 "$p" 2>/dev/null || fail "consumer-$1 (pid $p) was not running"
    wait "$p" 2>/dev/null
    handled=$(grep -c '^H' "$work/consumer-$1.$(eval echo "\$inc_$1").rec")
    echo "kill consumer-$1 $p $(elapsed)" >>"$work/kills"
    eval "pid_$1="
    say "kill -9 consumer-$1 (pid $p), which had handled $handled events"
}

"$demo" --role consumer --bootstrap-servers "$servers" --topic ringlane.idle --group idle \
    --name consumer-idle --idle-exit 1 --no-progress >"$work/idle.log" 2>&1 3>&- 4<&- &
idle_pid=$!
for n in 1 2 3; do start_consumer "$n"; done
"$demo" --role producer --bootstrap-servers "$servers" --messages "$messages" --rate "$rate" \
    --keys "$keys" --no-progress --record "$work/producer.rec" >"$work/producer.log" 2>&1 3>&- 4<&- &
producer_pid=$!
say "producer: $messages events over $keys keys at $rate/s (pid $producer_pid)"

# --- the schedule, drawn from SEED: kills with restarts, and broker 3 down for 2 s ---
# Times count from now (the processes have just started). The group forms in about 3 s, and
# each kill holds the group for a session timeout (3 s) before it rebalances, so the first
# kill comes after 6 s and the next ones at least 0.7 of a slot (span - 8 s over KILLS) apart.
t0=$(date +%s.%N)
span=$(awk -v m="$messages" -v r="$rate" 'BEGIN { printf "%.1f", m / r }')
awk -v seed="$seed" -v kills="$kills" -v span="$span" 'BEGIN {
    srand(seed)
    slot = (span - 8) / kills
    for (k = 0; k < kills; k++) t[k] = 6 + k * slot + rand() * slot * 0.3
    for (k = 0; k < kills; k++) {
        # a victim that is running at that moment
        do { v = 1 + int(rand() * 3) } while (back[v] > t[k])
        back[v] = t[k] + 0.2 + rand() * 1.8
        printf "%.2f kill %d\n%.2f start %d\n", t[k], v, back[v], v
    }
    down = span * 0.25 + rand() * span * 0.4
    printf "%.2f down 3\n%.2f up 3\n", down, down + 2
}' | sort -n >"$work/schedule"
say "schedule (seed $seed): $(tr '\n' ';' <"$work/schedule")"
while read -r at what who; do
    wait_s=$(awk -v s="$t0" -v n="$(date +%s.%N)" -v at="$at" 'BEGIN { d = at - (n - s); printf "%.2f", (d > 0 ? d : 0) }')
    sleep "$wait_s"
    case "$what" in
    kill) kill_consumer "$who" ;;
    start) start_consumer "$who" ;;
    down | up)
        cluster_cmd "$what $who"
        say "broker $who $what"
        ;;
    esac
done <"$work/schedule"

# --- the end: the producer finishes, the consumers drain ---
wait "$producer_pid"
status=$?
producer_pid=""
[ "$status" -eq 0 ] || fail "the producer failed (exit $status)"
say "$(grep '^producer:' "$work/producer.log" | tail -n 1)"
drain "$check" "$work/producer.rec"

# The consumer on the empty topic has ended by itself long ago (--idle-exit 1).
if kill -0 "$idle_pid" 2>/dev/null; then
    fail "a consumer that handled nothing did not end with --idle-exit 1"
fi
wait "$idle_pid"
status=$?
idle_pid=""
[ "$status" -eq 0 ] || fail "the idle consumer failed (exit $status)"
say "$(grep '^consumer-idle:' "$work/idle.log" | tail -n 1 | cut -c1-60)..."

# SIGTERM: each consumer revokes, commits and leaves; its own order check decides its status.
stop_consumers
cluster_quit
say "stopped; $(grep -c . "$work/kills") kills, $(files | wc -l) consumer processes in all"
for n in 1 2 3; do
    say "consumer-$n: $(grep -h "^consumer-$n: handled .* events" "$work/consumer-$n.log" | tail -n 1 | cut -d, -f1-3)"
done

# --- the verdict ---
"$check" "$work/producer.rec" "$work/kills" $(files)
status=$?
say "process_cluster: check_records exit $status"
exit "$status"
