/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth fence (docs/partition_growth.md, "The consumer's fence"): what the reader thread
 * (growth_reader.c) learns from __ringlane_growth and from the group's committed offsets, and
 * what the loop (growth_fence.c) holds with it. Not installed. */
#ifndef RINGLANE_CONSUMER_GROWTH_FENCE_H
#define RINGLANE_CONSUMER_GROWTH_FENCE_H

#include "growth_record.h"
#include "ringlane/ring.h"

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* A growth as the consumer uses it: a record that passed every check, or one that did not
 * (state RL__GROWTH_UNUSABLE, `problem` says why: its partitions [from, to) are held whole). */
#define RL__GROWTH_UNUSABLE (-1)

typedef struct rl__growth {
    char key[RL__GROWTH_KEY_MAX + 1];
    char topic[RL__GROWTH_TOPIC_MAX + 1];
    uint32_t from, to;
    int state;                      /* rl__growth_state, or RL__GROWTH_UNUSABLE */
    int64_t *points;                /* sealed: g_0..g_{from-1} */
    rl_ring_t *ring_from, *ring_to; /* the producers' rings over from and to (usable only) */
    char problem[320];
} rl__growth;

/* One complete read of the records: made by the reader thread, handed to the loop whole. */
typedef struct rl__growth_view {
    rl__growth *v;
    size_t n;
    uint64_t read_req; /* every read asked before this one began is answered by it */
} rl__growth_view;

void rl__growth_view_free(rl__growth_view *view);

typedef struct rl__growth_fence {
    /* Settings, fixed at the start. */
    char *profile;   /* the producers' ring profile */
    uint32_t vnodes; /* as a record names them (rl__growth_record_vnodes) */
    uint32_t reread_ms, read_timeout_ms;
    uint32_t stall_ms; /* growth_stall_ms: 0 never */
    char *group;       /* the consumer's group.id: whose committed offsets release */
    rd_kafka_t *rk;    /* the reader's handle: no group, read_committed, partition EOF */
    uv_thread_t thread;
    bool thread_started;
    void *wake_arg; /* the consumer, woken when something is published */

    /* Shared with the reader thread, under mu. */
    uv_mutex_t mu;
    bool stop;
    uint64_t read_req;                       /* loop: reads asked (one per assignment) */
    rl__growth_view *published;              /* reader: a read the loop has not taken yet */
    rd_kafka_topic_partition_list_t *want;   /* loop: old partitions whose commits release */
    rd_kafka_topic_partition_list_t *answer; /* reader: their committed offsets, last read */
    uint64_t read_errors;                    /* reader: failed reads */
    uint64_t read_error_runs;                /* reader: runs of failed reads (reported once) */
    char read_error[256];                    /* reader: why the last one failed */

    /* The loop's own. */
    rl__growth_view *view; /* NULL until a first read succeeded: every partition is held */
    uint64_t view_gen;     /* bumped at each view taken: partitions look their growth up again */
    rd_kafka_topic_partition_list_t *committed; /* the last answer taken */
    uint64_t reported_runs;
    uint64_t held_now;               /* messages in hold queues */
    struct rl__growth_stall *stalls; /* old partitions waited on, and since when (stall_ms) */
    size_t nstalls, capstalls;
} rl__growth_fence;

/* An old partition s of a topic that held messages wait on after a seal: its committed offset
 * as last read, since when it has stayed there, and whether that passed stall_ms. */
typedef struct rl__growth_stall {
    char topic[RL__GROWTH_TOPIC_MAX + 1];
    uint32_t s;
    int64_t offset;    /* the committed offset last read (-1: none), valid when known */
    bool known;        /* the last answer had it */
    uint64_t since_ms; /* uv_now when it was last seen to move (or became known) */
    bool stalled;      /* sticky: its moved keys go on from now on */
    bool waited;       /* held messages wait on it now (the last update_want) */
    int64_t point;     /* the growth point its holders wait for (for the report) */
} rl__growth_stall;

/* growth_reader.c: the thread. rl__growth_fence_reader_start takes a copy of conf (before the
 * consumer's own settings go in) for its handle. 0 or RL_EKAFKA / RL_ENOMEM / RL_ELOOP with the
 * detail set. */
int rl__growth_fence_reader_start(rl__growth_fence *f, const rd_kafka_conf_t *conf);
/* Stops and joins the thread (it ends its step within about 100 ms, or a metadata request's
 * bound), destroys the handle. */
void rl__growth_fence_reader_stop(rl__growth_fence *f);

#endif
