#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# docs/demo.md's recipe for steering `ringlane-demo --role cluster` from a shell, run as
# written: the sh blocks between its two "tests/cluster/demo_recipe.sh" markers are cut out of
# the document and run by sh in an empty directory where build/examples/ringlane-demo is the
# demo under test. The recipe starts the cluster, reads its ready line, sends three commands,
# kills the cluster with SIGKILL and sends one more: that one must say at once that the cluster
# has ended. The check: the ready line and the three answers on stdout, the message on stderr,
# the recipe's end (its own exit status), and no process of it left.
#
# Usage: tests/cluster/demo_recipe.sh DEMO DOCS_DEMO_MD
# The recipe ends in about a second; 60 s without its end is a hang, which fails the test.
set -u
demo="${1:?usage: demo_recipe.sh DEMO DOCS_DEMO_MD}"
doc="${2:?usage: demo_recipe.sh DEMO DOCS_DEMO_MD}"
work=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill -9 -- "-$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "demo_recipe: FAILED: $*"
    for f in recipe.sh out err; do
        echo "--- $f"
        cat "$work/$f" 2>/dev/null
    done
    exit 1
}

# The sh blocks between the markers, as they are.
awk '/<!-- The two sh blocks below are run as written by tests\/cluster\/demo_recipe.sh/ { on = 1 }
     /<!-- end of the blocks run by tests\/cluster\/demo_recipe.sh/ { on = 0 }
     on && /^```/ { inblock = !inblock; next }
     on && inblock' "$doc" >"$work/recipe.sh"
[ "$(grep -c . "$work/recipe.sh")" -ge 10 ] || fail "no recipe found between the markers of $doc"
mkdir -p "$work/build/examples"
ln -s "$(cd "$(dirname "$demo")" && pwd)/$(basename "$demo")" "$work/build/examples/ringlane-demo"

# In a session of its own, so that whatever it started can be found and ended.
cd "$work" || exit 1
setsid -w sh recipe.sh >out 2>err </dev/null &
pid=$!
i=0
while kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]; do
    i=$((i + 1))
    [ "$i" -le 600 ] || fail "the recipe did not end in 60 s"
    sleep 0.1
done
wait "$pid"
status=$?
echo "demo_recipe: the recipe ended in about $((i / 10)).$((i % 10)) s, exit status $status"

grep -q '^ready bootstrap\.servers=127\.0\.0\.1:[0-9]*,127\.0\.0\.1:[0-9]*,127\.0\.0\.1:[0-9]*$' out ||
    fail "no ready line"
for answer in "ok down 3" "ok up 3" "ok topic orders 4"; do
    grep -qx "$answer" out || fail "no answer '$answer'"
done
[ "$(grep -c . out)" -eq 4 ] || fail "stdout has more than the ready line and three answers"
grep -qx "the cluster process has ended" err || fail "the command after the kill did not say so"
# The kill ended the cluster: nothing of the recipe's session is left running. A process that
# has ended but is not reaped yet (a zombie, whose parent is no longer the recipe) is not
# running; one still alive after 2 s is.
live() { ps -o pid=,stat=,comm= -s "$pid" 2>/dev/null | awk '$2 !~ /^Z/'; }
i=0
while [ -n "$(live)" ] && [ "$i" -lt 20 ]; do
    i=$((i + 1))
    sleep 0.1
done
if [ -n "$(live)" ]; then
    fail "processes of the recipe are still running: $(live | tr '\n' ' ')"
fi
pid=""
echo "demo_recipe: ready line, three answers, and the command after the kill said the cluster had ended"
