# SPDX-License-Identifier: BSD-2-Clause
# Shared by the process-cluster scripts (sourced, with `work` and `start` set): timestamps,
# the failure report, the end of a run, and the mock cluster process steered through two FIFOs
# on descriptors 3 and 4.

elapsed() { awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'; }
say() { echo "[$(elapsed)s] $*"; }

# fail WHY: says why, shows the last lines of every log, exits 1.
fail() {
    say "FAILED: $*"
    for f in "$work"/*.log; do
        [ -f "$f" ] && { echo "--- $f (last lines)"; tail -n 5 "$f"; }
    done
    exit 1
}

# cleanup_run NAME PID...: kills the processes still running (SIGKILL; the caller clears a
# variable once its process ended), then keeps (KEEP=1) or removes $work.
cleanup_run() {
    name=$1
    shift
    for p in "$@"; do
        kill -9 "$p" 2>/dev/null
    done
    if [ "${KEEP:-0}" = 1 ]; then
        echo "$name: the files are in $work"
    else
        rm -rf "$work"
    fi
}

# cluster_start DEMO GROUP: the mock cluster (ringlane-demo --role cluster), its stdin and
# stdout FIFOs held on descriptors 3 and 4. It answers "ready bootstrap.servers=..." when it is
# up and one line per command; when it dies, the read of its stdout ends at once (docs/demo.md
# shows the same by hand). Sets cluster_pid and servers.
cluster_start() {
    mkfifo "$work/cluster.in" "$work/cluster.out"
    "$1" --role cluster --group "$2" <"$work/cluster.in" >"$work/cluster.out" \
        2>"$work/cluster.log" &
    cluster_pid=$!
    exec 3>"$work/cluster.in" 4<"$work/cluster.out"
    IFS= read -r ready <&4 || fail "the cluster process ended before it was ready"
    servers=${ready#ready bootstrap.servers=}
}

# cluster_cmd CMD: one command, and its answer ("ok CMD", else the run fails).
cluster_cmd() {
    (echo "$1" >&3) 2>/dev/null && IFS= read -r answer <&4 ||
        fail "cluster: the process ended (no answer to '$1')"
    [ "$answer" = "ok $1" ] || fail "cluster: $answer"
}

# The consumers' record files.
files() { ls "$work"/consumer-*.rec; }

# drain CHECK PRODUCED: waits until check_records says every produced event was handled, at
# most 90 s (a deadline that only ends a run that lost events, which check_records reports).
drain() {
    i=0
    until progress=$("$1" --progress "$2" "$work/kills" $(files)); do
        i=$((i + 1))
        if [ "$i" -gt 90 ]; then
            say "the consumers did not drain in 90 s: $progress"
            break
        fi
        sleep 1
    done
    say "drained: $progress"
}

# stop_consumers: SIGTERM to consumer-1..3 (pid_1..pid_3): each revokes, commits and leaves;
# its own order check decides its status, and any but 0 fails the run.
stop_consumers() {
    for n in 1 2 3; do
        eval "p=\$pid_$n"
        [ -n "$p" ] && kill -TERM "$p"
    done
    for n in 1 2 3; do
        eval "p=\$pid_$n"
        [ -n "$p" ] || continue
        wait "$p"
        status=$?
        eval "pid_$n="
        [ "$status" -eq 0 ] || fail "consumer-$n failed (exit $status)"
    done
}

# cluster_quit: ends the cluster process and closes the FIFOs.
cluster_quit() {
    cluster_cmd quit
    wait "$cluster_pid"
    cluster_pid=""
    exec 3>&- 4<&-
}
