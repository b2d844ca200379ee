/* SPDX-License-Identifier: BSD-2-Clause */
/* The pieces of ringlane-demo (examples/demo*.c): the order checker, the consumers on their loop
 * threads and the keyed producer. See demo.c for what the demo does. */
#ifndef RINGLANE_DEMO_H
#define RINGLANE_DEMO_H

#include <ringlane/consumer.h>
#include <ringlane/partitioner.h>
#include <ringlane/ringlane.h>

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define DEMO_PARTITIONS_MAX 256
#define DEMO_PHASES_MAX 16
#define DEMO_CONSUMERS 2
#define DEMO_LANES_MAX 16

/* --- the order checker, shared by every consumer of the process --- */

typedef struct demo_check {
    int keys;
    uint64_t run;  /* messages of other runs are counted as foreign and skipped */
    bool anchored; /* consumer role: another process may have handled a key's middle part, so
                      a key's check restarts when its partition is assigned here again */
    _Atomic int64_t *next; /* per key: the sequence number expected next (-1: not anchored) */
    atomic_int *busy;      /* per key: a handler has it now */
    _Atomic uint32_t *gen; /* per key: partition << 24 | its assignment count, when last seen */
    atomic_uint part_gen[DEMO_PARTITIONS_MAX];
    atomic_int phase;       /* the change in progress (for duplicates) */
    atomic_long handled;    /* handler calls that succeeded on keyed events */
    atomic_long unique;     /* events handled for the first time */
    atomic_long duplicates; /* redelivered events (at-least-once) */
    atomic_long dup_in_phase[DEMO_PHASES_MAX];
    atomic_long violations; /* a sequence number skipped */
    atomic_long overlaps;   /* two handlers with the same key at once */
    atomic_long foreign, keyless, poison_calls;
    atomic_llong first_ns, last_ns;
    atomic_int work_us; /* busy work per event */
} demo_check;

int demo_check_init(demo_check *ck, int keys, uint64_t run, bool anchored);
void demo_check_free(demo_check *ck);
/* In a handler: checks and counts one message. Returns 0, or -1 for the poison message (the
 * handler fails it, so that it is retried and dead-lettered). */
int demo_check_message(demo_check *ck, const rd_kafka_message_t *m);
/* Events seen of `per_key[k]` produced per key, and the ones missing. */
long demo_check_missing(demo_check *ck, const long *per_key);

/* --- the consumers --- */

struct demo;

enum { DEMO_CMD_NONE, DEMO_CMD_CLOSE, DEMO_CMD_ADD_LANE, DEMO_CMD_REMOVE_LANE, DEMO_CMD_STATS };

typedef struct demo_consumer {
    struct demo *app;
    int index; /* 0, 1: its name is consumer-<index+1> (--name, or consumer-<pid>, alone) */
    char name[32];
    uv_thread_t thread;
    uv_loop_t loop;
    uv_async_t ctl;
    uv_mutex_t mu;
    uv_cond_t cv;
    rl_consumer_t *c;
    bool started, running;
    int start_rc;
    int cmd, cmd_rc;
    bool cmd_done;
    char arg[64];
    int assigned;            /* partitions held (under mu) */
    rl_consumer_stats stats; /* at the end of its close (or the last DEMO_CMD_STATS) */
    char stats_json[16384];  /* the last DEMO_CMD_STATS */
    long dead_letters, errors;
    char last_error[256];
    /* --record: the commits and refusals written so far (loop thread) */
    uv_timer_t record_timer;
    bool record_timer_on;
    int64_t recorded_commit[DEMO_PARTITIONS_MAX];
    uint64_t recorded_failures;
} demo_consumer;

int demo_consumer_start(demo_consumer *dc, struct demo *app, int index);
int demo_consumer_command(demo_consumer *dc, int cmd, const char *arg);
void demo_consumer_stop(demo_consumer *dc);
int demo_consumer_assigned(demo_consumer *dc);
/* One line for a report: the partitions it holds, its on_error count and the last message. */
void demo_consumer_describe(demo_consumer *dc, char *out, size_t cap);

/* --- the producer --- */

typedef struct demo_producer {
    struct demo *app;
    rd_kafka_t *rk;
    rl_kafka_partitioner_t *part;
    uv_thread_t thread;
    atomic_long enqueued, delivered, failed;
    atomic_bool done;
    long *per_key; /* events produced per key (written by the producer thread) */
    bool specials; /* also the poison, keyless and oversized-key messages */
} demo_producer;

int demo_producer_start(demo_producer *p, struct demo *app, bool specials);
void demo_producer_join(demo_producer *p);
void demo_producer_free(demo_producer *p);
int demo_producer_partition(demo_producer *p, int key, int32_t partitions, int32_t *out);

/* --- the application --- */

typedef struct demo {
    /* options */
    const char *role, *servers, *topic, *group, *assignor, *dlq_topic;
    int partitions, keys, lanes, replication;
    long messages, rate;
    int work_us, idle_exit_s;
    int session_timeout_ms;    /* 0: librdkafka's default (2500 on the mock cluster here) */
    long offset_map_max_bytes; /* the consumers' offset_map_max_bytes, -1: their default */
    const char *name;          /* --name: the consumer's name when it runs alone */
    const char *record;        /* --record FILE: what this process produced or handled */
    int record_fd;             /* -1: none */
    int cycles;                /* times the change script runs over the run (--cycles) */
    int key_base;              /* --key-base: the producer's keys are user:<key_base + k> */
    long seq_base;             /* --seq-base: each key's first sequence number */
    int partitions_used;       /* --partitions-used: ringlane.partitions.used, 0: unset */
    bool growth_fence;         /* --growth-fence: the consumers' growth_fence */
    bool progress, mock_mode;
    uint64_t run;
    char group_buf[64], dlq_buf[300];
    const char *lane_names[DEMO_LANES_MAX];
    char lane_buf[DEMO_LANES_MAX][16];
    /* state */
    demo_check check;
    uv_mutex_t mu;
    int owner[DEMO_PARTITIONS_MAX]; /* the consumer holding each partition, -1 none (mu) */
    atomic_bool stop;               /* SIGINT / SIGTERM */
} demo;

/* The consumer configuration for this demo (mock: quick group changes). */
rd_kafka_conf_t *demo_consumer_conf(demo *app);
/* The name of key k ("user:<k>"), its length. */
int demo_key(int k, char *buf, size_t size);
uint64_t demo_now_ns(void);
void demo_sleep_ms(unsigned ms);

/* --- the record file (--record) ---
 *
 * One line per fact, written with one write(2) each, so that a line is in the file (the
 * kernel's) as soon as the call returns, even if the process is killed right after; only a
 * kill in the middle of a write can leave a last line cut short. Times are CLOCK_MONOTONIC
 * nanoseconds (uv_hrtime), one clock for every process of the machine:
 *
 *   N <t> <name> <pid>                        who writes this file
 *   P <t> <key> <seq> <partition> <offset>     produced and acknowledged (delivery report)
 *   A <t> <partition> <generation>             assigned here (the generation counts them)
 *   R <t> <partition> / L <t> <partition>      revoked (after its final commit) / lost
 *   H <t> <key> <seq> <partition> <offset> <generation> <start>   handled (written before
 *                                          the handler returns; start: when it began)
 *   D <t> <key> <seq> <partition> <offset>     dead-lettered (before its offset completes)
 *   C <t> <partition> <offset>                 a commit the group acknowledged
 *   F <t> <count>                              commits refused so far (when it grows)
 *
 * Keys without a key are "-", keys that are not short printable text "?"; events without a
 * sequence number (the poison, keyless and oversized ones) have seq -1. */
void demo_record(demo *app, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* The key and sequence number of a message as the record file writes them. */
void demo_record_key(const rd_kafka_message_t *m, char *key, size_t size, long long *seq);

#endif
