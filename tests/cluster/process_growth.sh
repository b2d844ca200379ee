#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# A keyed topic grown from 8 to 12 partitions while it is read, every role a process of its own
# (docs/partition_growth.md, "How it is tested"). librdkafka's mock cluster cannot add
# partitions, so the topic is made with 12 and the producers route over the first 8 until
# they switch (ringlane.partitions.used): the same messages in the same partitions as a real
# growth, with `ringlane grow --from 8` recording it.
#
#   - the mock cluster (ringlane-demo --role cluster), three consumers of one group
#     (ringlane-demo --role consumer, with --growth-fence unless FENCE=0);
#   - two producers with disjoint keys (user:0..149 and user:150..299), each on 8 partitions;
#   - `ringlane grow --announce-only` records the growth (and waits its 30 s announce wait);
#   - the rolling switch: producer A ends, and once the growth is announced a new producer A
#     takes over its keys on 12 partitions (--seq-base: each key's sequence numbers go on);
#     producer B goes on over 8 for 3.6 s more (the late one), then switches the same way;
#   - once B's old producer has ended, `ringlane grow --pinned` seals the growth;
#   - consumer-2 is killed with SIGKILL when A's old producer has 1.5 s of events left (its
#     old partitions wait for the group to notice, while A's moved keys already go to new
#     partitions) and started again; consumer-3 is killed 1 s after the seal (while the
#     fence holds moved keys) and started again.
#
# check_records (shares no code with the demo or the consumer) judges every file: per-key
# order in each assignment, nothing lost, no commit past an unhandled event, every duplicate
# explained, and (5) each key's events in sequence-number order across partitions and
# processes: none began before every earlier one had ended. With the fence all of it must
# hold. With FENCE=0 the run shows what the fence prevents: (5) is counted (--count-across),
# must be above 0, and everything else must still hold.
#
# Usage: tests/cluster/process_growth.sh DEMO CHECK_RECORDS RINGLANE
#        (build/examples/ringlane-demo, build/tests/cluster/check_records,
#         build/tools/ringlane/ringlane)
# Environment: FENCE (1), RATE (events/s per producer, 500), KEEP=1 keeps the work directory.
# Loopback only; about 70 s. Timing never decides the verdict: the drain's deadline (90 s)
# only ends a run that lost events, which check_records then reports.
set -u
demo="${1:?usage: process_growth.sh DEMO CHECK_RECORDS RINGLANE}"
check="${2:?usage: process_growth.sh DEMO CHECK_RECORDS RINGLANE}"
ringlane="${3:?usage: process_growth.sh DEMO CHECK_RECORDS RINGLANE}"
fence="${FENCE:-1}"
rate="${RATE:-500}"
topic=ringlane.grow
group=ringlane-growth
keys=150     # per producer
first_a=120  # each of A's keys' events before its switch (36 s at 500/s)
first_b=132  # B's (39.6 s: the late one)
second=20    # each key's events after the switch
grow="--bootstrap-servers SERVERS --topic $topic --from 8 --partitions 12 --profile balanced"
grow="$grow --vnodes default --announce-wait 30 --timeout 30"
work=$(mktemp -d)
start=$(date +%s.%N)

cluster_pid=""
pid_1=""
pid_2=""
pid_3=""
prod_pids=""
grow_pid=""
. "$(dirname "$0")/cluster_lib.sh"
trap 'cleanup_run process_growth $pid_1 $pid_2 $pid_3 $prod_pids $grow_pid $cluster_pid' EXIT
trap 'exit 1' INT TERM

# --- the cluster ---
cluster_start "$demo" "$group"
grow=$(echo "$grow" | sed "s|SERVERS|$servers|")
cluster_cmd "topic $topic 12"
cluster_cmd "topic __ringlane_growth 1"
say "cluster: $servers; $topic with 12 partitions, producers on 8 until they switch"

# --- consumers ---
fence_opt="--growth-fence"
[ "$fence" = 0 ] && fence_opt=""
inc_1=0
inc_2=0
inc_3=0
start_consumer() {
    eval "inc=\$((inc_$1 + 1)); inc_$1=\$inc"
    "$demo" --role consumer --bootstrap-servers "$servers" --topic "$topic" --group "$group" \
        --name "consumer-$1" --keys $((2 * keys)) --session-timeout-ms 3000 --work-us 200 \
        --no-progress $fence_opt --record "$work/consumer-$1.$inc.rec" \
        >>"$work/consumer-$1.log" 2>&1 3>&- 4<&- &
    eval "pid_$1=\$!"
    say "start consumer-$1 (incarnation $inc, pid $!)"
}
: >"$work/kills"
kill_consumer() {
    eval "p=\$pid_$1"
    kill -9 "$p" 2>/dev/null || fail "consumer-$1 (pid $p) was not running"
    wait "$p" 2>/dev/null
    echo "kill consumer-$1 $p $(elapsed)" >>"$work/kills"
    say "kill -9 consumer-$1 (pid $p)"
}
for n in 1 2 3; do start_consumer "$n"; done

# --- producers: NAME KEY_BASE USED SEQ_BASE PER_KEY ---
start_producer() {
    "$demo" --role producer --bootstrap-servers "$servers" --topic "$topic" --keys "$keys" \
        --key-base "$2" --partitions-used "$3" --seq-base "$4" --messages $((keys * $5)) \
        --rate "$rate" --no-progress --record "$work/$1.prec" >"$work/$1.log" 2>&1 3>&- 4<&- &
    eval "prod_$1=\$!"
    prod_pids="$prod_pids $!"
    say "producer $1: user:$2.. on $3 partitions, sequence numbers $4..$(($4 + $5 - 1))"
}
wait_producer() {
    eval "p=\$prod_$1"
    wait "$p" || fail "producer $1 failed"
    say "$1: $(grep '^producer:' "$work/$1.log" | tail -n 1)"
}
start_producer a1 0 8 0 "$first_a"
start_producer b1 "$keys" 8 0 "$first_b"

# --- the growth announced (30 s announce wait: every consumer has read it by then) ---
"$ringlane" grow $grow --announce-only >"$work/announce.log" 2>&1 3>&- 4<&- &
grow_pid=$!
say "ringlane grow --announce-only (pid $grow_pid)"

# consumer-2 killed when A's old producer has 1.5 s of events left (counted from its
# acknowledged events, so a loaded machine moves the kill with the producer); back 1 s later.
kill_at=$((keys * first_a - rate * 3 / 2))
while kill -0 "$prod_a1" 2>/dev/null; do
    acked=$(grep -c '^P' "$work/a1.prec" 2>/dev/null)
    [ "${acked:-0}" -ge "$kill_at" ] && break
    sleep 0.1
done
kill_consumer 2
sleep 1
start_consumer 2

wait "$grow_pid" || fail "ringlane grow --announce-only failed: $(tail -n 3 "$work/announce.log")"
grow_pid=""
say "announced: $(tail -n 1 "$work/announce.log")"
wait_producer a1
start_producer a2 0 12 "$first_a" "$second"
wait_producer b1
start_producer b2 "$keys" 12 "$first_b" "$second"

# --- the seal: every producer routes over 12 now ---
"$ringlane" grow $grow --pinned >"$work/seal.log" 2>&1 3>&- 4<&- ||
    fail "ringlane grow --pinned failed: $(tail -n 3 "$work/seal.log")"
say "sealed: $(tail -n 1 "$work/seal.log")"
sleep 1
kill_consumer 3
sleep 1
start_consumer 3
wait_producer a2
wait_producer b2
prod_pids=""

# --- the end: the consumers drain, then end with SIGTERM (revoke, commit, leave) ---
cat "$work"/*.prec >"$work/produced.rec"
drain "$check" "$work/produced.rec"
stop_consumers
cluster_quit

# What the fence held, from each process's final statistics (a killed one prints none).
held=0
for n in 1 2 3; do
    h=$(grep -h -o '"growth_held":[0-9]*' "$work/consumer-$n.log" | tail -n 1 | cut -d: -f2)
    r=$(grep -h -o '"growth_released":[0-9]*' "$work/consumer-$n.log" | tail -n 1 | cut -d: -f2)
    held=$((held + ${h:-0}))
    say "$(grep -h "^consumer-$n: handled .* events" "$work/consumer-$n.log" |
        tail -n 1 | cut -d, -f1-3); the growth fence held ${h:-0}, released ${r:-0}"
done

# --- the verdict ---
if [ "$fence" = 0 ]; then
    "$check" --count-across "$work/produced.rec" "$work/kills" $(files) >"$work/verdict" 2>&1
    status=$?
    cat "$work/verdict"
    across=$(sed -n 's/^  order across *\([0-9]*\).*/\1/p' "$work/verdict")
    [ "$status" -eq 0 ] || fail "without the fence, something other than the order across failed"
    [ "${across:-0}" -gt 0 ] ||
        fail "without the fence, no key's order across partitions broke: the run shows nothing"
    say "process_growth without the fence: $across events began before an earlier one of their key had ended"
    exit 0
fi
# A fence that held nothing would pass vacuously: moved keys' messages reach the new
# partitions before the seal, so the surviving consumers must have held some.
[ "$held" -gt 0 ] || fail "the growth fence held no message: it did not engage"
"$check" "$work/produced.rec" "$work/kills" $(files)
status=$?
say "process_growth: check_records exit $status"
exit "$status"
