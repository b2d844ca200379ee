#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Runs one client's snippets of docs/clients.md as they are written, against librdkafka's mock
# cluster: the fenced block after each `<!-- snippet: NAME -->` line, with only the placeholders
# replaced (broker:9092 by the cluster's bootstrap servers, /usr/local/lib/ringlane_partitioner.so
# by the plugin built here, rsyslog's port 10514 by a free one). The client produces 3,800 keyed
# messages to a topic of 12 partitions through the plugin; the page's own check (snippet
# "check": kcat reads the topic back, `ringlane route` predicts) must then find every key on its
# ring partition. The same read-back compared with another profile's ring must miss most keys,
# which shows the comparison can fail.
#
# Usage: doc_snippets.sh CLIENT SOURCE_DIR MOCK_CLUSTER_HOST RINGLANE_CLI PLUGIN WORK_DIR
# CLIENT: kcat, python, node, go, syslog-ng, rsyslog. Exit 0: every key on its ring partition;
# 1: not; 77 (skipped): the client, or kcat to read back, is not installed. node needs
# RINGLANE_NODE_PREFIX, a folder where `BUILD_LIBRDKAFKA=0 npm install node-rdkafka` was run.
set -u
client="$1" src="$2" host="$3" cli="$4" plugin="$5" work="$6/$client"
doc="$src/docs/clients.md"
keys=3800
partitions=12
PATH="$PATH:/usr/sbin"

skip() {
    echo "$client: skipped: $*"
    exit 77
}
fail() {
    echo "$client: FAILED: $*"
    exit 1
}
version() { dpkg-query -W -f='${Package} ${Version}' "$1" 2>/dev/null; }

case "$client" in
kcat) what="$(version kcat)" ;;
python)
    /usr/bin/python3 -c 'import confluent_kafka' 2>/dev/null ||
        skip "Debian's python3-confluent-kafka is not installed"
    what="$(version python3-confluent-kafka)"
    ;;
node)
    command -v node >/dev/null || skip "node is not installed"
    [ -n "${RINGLANE_NODE_PREFIX:-}" ] && [ -d "$RINGLANE_NODE_PREFIX/node_modules/node-rdkafka" ] ||
        skip "RINGLANE_NODE_PREFIX does not name a folder where node-rdkafka was installed"
    export NODE_PATH="$RINGLANE_NODE_PREFIX/node_modules"
    what="node-rdkafka $(node -p "require('node-rdkafka/package.json').version + ', librdkafka ' +
        require('node-rdkafka').librdkafkaVersion"), node $(node --version)"
    ;;
go)
    command -v go >/dev/null && [ -d /usr/share/gocode/src/github.com/confluentinc/confluent-kafka-go/kafka ] ||
        skip "golang-go and golang-github-confluentinc-confluent-kafka-go-dev are not installed"
    export GOCACHE="$6/go-cache"
    what="$(version golang-github-confluentinc-confluent-kafka-go-dev), $(go version)"
    ;;
syslog-ng)
    command -v syslog-ng >/dev/null && ls /usr/lib/syslog-ng/*/libkafka.so >/dev/null 2>&1 ||
        skip "syslog-ng-mod-rdkafka is not installed"
    what="$(version syslog-ng-mod-rdkafka)"
    ;;
rsyslog)
    command -v rsyslogd >/dev/null && ls /usr/lib/*/rsyslog/omkafka.so >/dev/null 2>&1 ||
        skip "rsyslog-kafka is not installed"
    [ -x /usr/bin/python3 ] || skip "python3 (sends the messages) is not installed"
    what="$(version rsyslog-kafka)"
    ;;
*)
    echo "doc_snippets.sh: unknown client '$client'" >&2
    exit 2
    ;;
esac
command -v kcat >/dev/null || skip "kcat (reads the topic back) is not installed"

rm -rf "$work" && mkdir -p "$work/bin" && cd "$work" || exit 1
ln -s "$cli" bin/ringlane # the check snippet calls `ringlane`

# The mock cluster lives while fd 3 (its standard input) is open.
mkfifo hold
"$host" 3 "events:$partitions" <hold >bootstrap.txt &
host_pid=$!
exec 3>hold
daemon_pid=""
cleanup() {
    [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null
    exec 3>&-
    wait
}
trap cleanup EXIT
for _ in $(seq 100); do
    [ -s bootstrap.txt ] && break
    kill -0 "$host_pid" 2>/dev/null || fail "the mock cluster did not start"
    sleep 0.1
done
bootstrap=$(head -n 1 bootstrap.txt)
[ -n "$bootstrap" ] || fail "the mock cluster printed no bootstrap servers"

# snippet NAME: that block of docs/clients.md, placeholders replaced.
snippet() {
    awk -v mark="<!-- snippet: $1 -->" '
        $0 == mark { found = 1; next }
        found && /^```/ { if (body) exit; body = 1; next }
        found && body { print }' "$doc" |
        sed -e "s|broker:9092|$bootstrap|g" -e "s|/usr/local/lib/ringlane_partitioner.so|$plugin|g"
}
for name in check "$client" $(case "$client" in python | node | go) echo "$client-run" ;; esac); do
    [ -n "$(snippet "$name")" ] || fail "docs/clients.md has no <!-- snippet: $name --> block"
done

# Keys user-0 ... user-3799; the syslog daemons take them as the host names of syslog lines.
seq 0 $((keys - 1)) | sed 's/^/user-/' >keys.txt
syslog_lines() { awk '{ print "<13>Dec  3 13:00:00 " $0 " app[1]: message " NR }' keys.txt; }

case "$client" in
kcat)
    snippet kcat >produce.sh
    sed 's/$/\t.../' keys.txt | sh produce.sh || fail "kcat failed"
    ;;
python)
    snippet python >produce.py
    snippet python-run >run.sh
    sh run.sh || fail "the Python program failed"
    ;;
node)
    snippet node >produce.js
    snippet node-run >run.sh
    sh run.sh || fail "the node program failed"
    ;;
go)
    snippet go >produce.go
    snippet go-run >run.sh
    sh run.sh || fail "the Go program failed to build or to produce"
    ;;
syslog-ng)
    snippet syslog-ng >syslog-ng.conf
    # In the foreground; it ends at the end of its standard input (which must be a pipe).
    syslog_lines | syslog-ng -F -f "$work/syslog-ng.conf" -R "$work/persist" -p "$work/pid" \
        -c "$work/ctl" --no-caps -e >syslog-ng.log 2>&1 || {
        cat syslog-ng.log
        fail "syslog-ng failed"
    }
    ;;
rsyslog)
    port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    snippet rsyslog | sed "s/port=\"10514\"/port=\"$port\"/" >rsyslog.conf
    rsyslogd -n -f "$work/rsyslog.conf" -i "$work/rsyslogd.pid" >rsyslog.log 2>&1 &
    daemon_pid=$!
    syslog_lines >lines.txt
    /usr/bin/python3 - "$port" lines.txt <<'EOF' || fail "could not send to rsyslog"
import socket, sys, time
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("rsyslog does not listen")
s.sendall(open(sys.argv[2], "rb").read())
s.close()
EOF
    ;;
esac

# Everything delivered? (rsyslog sends on its own time: wait up to 60 s.)
read_back() { kcat -C -b "$bootstrap" -t events -e -q -f '%k\n' 2>/dev/null | wc -l; }
for _ in $(seq 120); do
    [ "$(read_back)" -ge "$keys" ] && break
    sleep 0.5
done
[ -f rsyslog.log ] && cat rsyslog.log

snippet check >check.sh
on=$(PATH="$work/bin:$PATH" sh check.sh) || fail "the check failed"
read=$(read_back)
other=$("$cli" route --profile default --partitions "$partitions" <keys.txt | sort | comm -12 - got.txt | wc -l)
echo "$client: $on/$keys keys on their ring partition ($read messages read back; $what)"
echo "$client: control: $other/$keys on the partition of profile default's ring"
[ "$on" -eq "$keys" ] || fail "keys off their ring partition"
[ "$other" -lt $((keys / 2)) ] || fail "the check cannot tell two rings apart"
exit 0
