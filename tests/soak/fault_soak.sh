#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# The fault soak, not run by CI: test_fault_matrix's consumer group (two consumers, async and
# blocking handlers, a poison key dead-lettered, 3 mock brokers, 6 partitions) through faults
# drawn at random from the short matrix and the extra ones (OffsetCommit, Fetch, JoinGroup,
# SyncGroup, Heartbeat and Produce errors, leader and coordinator moves, a slow broker), with
# the message count and the way the consumers close drawn too, until SECONDS have passed. One
# line per case; it fails on any loss, order violation, unexplained duplicate, commit past an
# unfinished message, or completed work left uncommitted by a clean close.
#
# Usage: tests/soak/fault_soak.sh [SECONDS (default 600)] [BUILD_DIR (default build)]
# Environment: SEED (default: the time; printed, and RINGLANE_FAULT_SEED=SEED repeats the draw).
set -eu
seconds="${1:-600}"
build="${2:-build}"
suite="$build/tests/test_fault_matrix"
[ -x "$suite" ] || { echo "fault soak: $suite is missing: run 'make build' first" >&2; exit 2; }
seed="${SEED:-$(date +%s)}"
echo "fault soak: ${seconds}s, seed $seed"
RINGLANE_FAULT_SOAK_SECONDS="$seconds" RINGLANE_FAULT_SEED="$seed" \
    RINGLANE_TEST_FILTER=fault_soak "$suite"
