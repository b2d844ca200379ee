/* SPDX-License-Identifier: BSD-2-Clause */
/* Internals shared by the consumer's source files. Not installed.
 *
 * Everything here is touched on the loop thread only, except `wake_mu`/`wake_alive` (taken by
 * librdkafka's threads when a queue turns non-empty) and the handler's read of `opts`. */
#ifndef RINGLANE_CONSUMER_INTERNAL_H
#define RINGLANE_CONSUMER_INTERNAL_H

#include "offset_map.h"
#include "offsets.h"
#include "ringlane/consumer.h"
#include "ringlane/error.h"
#include "token_bucket.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

/* Messages kept, in order, while their partition is paused: a ring buffer that grows. */
typedef struct rl__msgq {
    rd_kafka_message_t **v;
    size_t cap, head, len;
} rl__msgq;

int rl__msgq_push(rl__msgq *q, rd_kafka_message_t *m); /* RL_ENOMEM */
rd_kafka_message_t *rl__msgq_front(const rl__msgq *q);
void rl__msgq_pop(rl__msgq *q);
void rl__msgq_clear(rl__msgq *q); /* destroys the messages */
void rl__msgq_free(rl__msgq *q);

struct rl__topic;

/* One partition, allocated the first time it is assigned and kept until the consumer is
 * freed, so jobs may point at it across revokes: their epoch tells whether they still count. */
typedef struct rl__part {
    struct rl__topic *topic;
    int32_t partition;
    int64_t tag;    /* the dispatcher tag of its jobs: topic index << 32 | partition */
    uint32_t epoch; /* bumped at every assign and revoke */
    /* The epoch whose jobs a blocking handler may still start: the assignment's, until its
     * revoke or loss begins (then 0, no job's). The lane workers read it (flow.c). */
    atomic_uint start_epoch;
    bool assigned;
    bool paused;      /* by us, for backpressure */
    bool window_full; /* the last refusal was the window's: retry when an offset completes */
    bool rate_held;   /* the last refusal was the rate limit's (intake_rate.c) */
    rl__offsets win;
    int64_t next_offset;      /* the offset after the last message taken, -1 before the first */
    int64_t committed;        /* acknowledged by the group coordinator, -1 before */
    int64_t stored;           /* the last watermark handed to librdkafka's auto-committer */
    rl__msgq pending;         /* refused messages, oldest first */
    uint32_t dlq_in_flight;   /* dead letters of this epoch waiting for a delivery report */
    uint32_t live;            /* jobs of this epoch in the dispatcher (queued or in flight) */
    bool revoking;            /* asynchronous consumers: a deferred revoke is waiting for it */
    struct rl__cjob *started; /* asynchronous jobs of this epoch started and not ended */
    /* The jobs taken in epoch held_epoch and not freed, oldest first (flow.c, HOLDERS): the
     * first is the message at the oldest unfinished offset, the watermark's holder. */
    struct rl__cjob *held_first, *held_last;
    uint32_t held_epoch;
    char null_key[48]; /* the key keyless messages are dispatched under */
    size_t null_key_len;
    /* The offset map (partition_map.c). */
    rl__offset_map prior; /* the map its assignment read, while messages it covers may come */
    size_t prior_at;      /* the first of prior's spans not passed yet */
    uint64_t progress;    /* bumped by every completion and skip: the next commit changed */
    uint64_t committed_progress; /* progress of the last commit acknowledged (this epoch) */
    uint64_t sent_progress;      /* ... of the periodic commit in flight, with its epoch */
    uint32_t sent_epoch;
    uint64_t map_bytes; /* the map the last acknowledged commit carried */
    /* The growth fence (growth_fence.c). */
    struct rl__growth_holds *holds; /* its held messages per source partition, or NULL */
    uint64_t fence_req;             /* the read of the records its assignment asked for */
    uint64_t fence_gen;             /* the view fence_growth, late_growth were looked up in */
    const struct rl__growth *fence_growth; /* the growth that made it, NULL for none */
    int64_t fence_counted; /* the newest offset counted in growth_held (held whole, or then as a
                              moved key's: counted once) */
    int64_t fence_seen;    /* the newest offset rl__growth_fence_admit counted (a message
                              refused by the lanes comes back: counted once) */
    const struct rl__growth *late_growth; /* the newest sealed growth it is an old partition of
                                             (looked up with fence_growth, at fence_gen) */
    bool late_reported;                   /* a late producer's message reported (this epoch) */
    bool fence_check_start; /* assigned without a commit before the records were read */
} rl__part;

typedef struct rl__topic {
    char *name;
    char *dlq; /* the dead-letter topic for its messages, NULL when there is none */
    uint32_t index;
    rl__part **parts; /* by partition number, NULL where never assigned */
    int32_t nparts;
    const rd_kafka_topic_t *last_rkt; /* the handle its messages came with, a lookup shortcut */
} rl__topic;

/* A message on its way: in a lane, or waiting for the dead-letter topic. */
typedef struct rl__cjob {
    rl_consumer_t *c;
    rl__part *part;
    uint32_t epoch;
    int64_t offset;
    rd_kafka_message_t *msg;
    /* dead letters */
    char reason[160];
    uint32_t attempts;
    uint64_t retry_at_ms; /* when a failed dead-letter produce is tried again, 0: not waiting */
    struct rl__cjob *prev, *next; /* in c->dead_letters */
    /* asynchronous jobs */
    uint64_t ticket;                /* the attempt in flight, 0 when none */
    bool live;                      /* counted in part->live */
    bool in_started;                /* linked in part->started */
    bool abandoned;                 /* ended by a revoke or loss: its result counts for nothing */
    struct rl__cjob *sprev, *snext; /* in part->started */
    /* The watermark's holder (flow.c, HOLDERS): the jobs of a partition not freed yet, in
     * offset order; when it was taken, and its handler calls. A blocking handler's worker
     * writes failures and running; the loop reads them. */
    bool held;                      /* linked in its partition's list */
    struct rl__cjob *hprev, *hnext; /* in part->held_first .. held_last (of its epoch) */
    uint64_t taken_ms;              /* the loop's time when the consumer took it */
    atomic_uint failures; /* handler calls that failed (asynchronous: before the last start) */
    atomic_bool running;  /* a blocking handler is in its call now */
    /* Its partition's revoke or loss had begun when a worker took it: the handler was not
     * called. Written by the worker before the job ends, read in rl__job_done. */
    bool not_started;
    struct rl__cjob *batch_next; /* the next job of its asynchronous batch (same ticket) */
    struct rl__cjob *fnext;      /* held by the growth fence: the next of its queue */
    uint32_t fsrc;               /* ... whose source partition is this */
} rl__cjob;

/* This consumer's JoinGroup and SyncGroup requests in flight (group_watch.c), written by
 * librdkafka's broker threads under mu. */
#define RL__GROUP_WATCH_MAX 8
typedef struct rl__group_request {
    int32_t broker;
    int16_t api; /* JoinGroup or SyncGroup */
} rl__group_request;
typedef struct rl__group_watch {
    uv_mutex_t mu;
    rl__group_request v[RL__GROUP_WATCH_MAX];
    int n;
    uint64_t joins;  /* JoinGroup answers so far */
    uint64_t beats;  /* Heartbeat answers seen so far (librdkafka 2.0 reports each twice) */
    uint64_t leaves; /* LeaveGroup requests sent so far */
} rl__group_watch;

/* A revoke of an asynchronous consumer, waiting for the partitions' messages in flight. */
typedef struct rl__revoke {
    bool active;
    bool lost;                              /* nothing is waited for or committed */
    bool unassign;                          /* tell librdkafka when done */
    rd_kafka_topic_partition_list_t *parts; /* as librdkafka gave them (a copy) */
    struct rl__part **mine;                 /* those of them we hold */
    size_t n;
    uint64_t deadline_ms;
} rl__revoke;

struct rl_consumer {
    uv_loop_t *loop;
    uv_thread_t loop_thread;
    rl_consumer_options opts; /* conf, dlq_conf and the topic list are not kept */
    rl_dispatcher_t *d;
    rl_dispatcher_t *d_for_complete; /* the same, never cleared: read by other threads */
    bool async;                      /* opts.async_handler is set */
    rd_kafka_t *rk;                  /* the consumer */
    rd_kafka_queue_t *q;             /* its consumer queue (the main queue is forwarded to it) */
    rd_kafka_t *dlq; /* the dead-letter producer, NULL without a dead-letter topic */
    rd_kafka_queue_t *dlq_q;
    rd_kafka_conf_t *dlq_conf;  /* a copy of its configuration, for a replacement */
    uint64_t dlq_restart_at_ms; /* no replacement before then (one per dlq_retry_ms) */
    int dlq_enabled;            /* 0 when opts.dlq_topic is "" */

    uv_async_t wake;  /* librdkafka's queues have something, or a batch was cut short */
    uv_timer_t timer; /* the safety net: polls, commits, dead-letter retries, paused partitions */
    uv_timer_t revoke_timer; /* a deferred revoke: looks again now, or at its deadline */
    uv_timer_t rate_timer;   /* the rate limit's next token (intake_rate.c) */
    rl__revoke revoke;
    uv_mutex_t wake_mu;
    bool wake_alive; /* under wake_mu: the handle may still be woken */
    int handles_open;

    rl__topic **topics;
    uint32_t ntopics;

    rl__cjob *dead_letters;      /* every dead letter not yet delivered, oldest first */
    rl__cjob *dead_letters_tail; /* ... and the newest */
    bool serving;                /* inside a poll batch */
    bool closing;                /* rl_consumer_close was called */
    bool cooperative;            /* the group's protocol, as librdkafka last said (rebalance.c) */
    bool draining;               /* a close took the queued jobs back and waits for the rest */
    uint64_t drain_until_ms;     /* ... until then at most (revoke_timeout_ms) */
    bool leaving;                /* librdkafka is closing the consumer (close_queue called) */
    uint64_t leave_mark;         /* LeaveGroup requests sent before that (rl__group_leaves) */
    bool kafka_closed;           /* ... and has finished */
    bool dispatcher_gone;
    /* librdkafka before 2.3.0 with cooperative-sticky: a close before the first assignment
     * waits for it (see may_leave in consumer.c). */
    bool coop_destroy_hazard;
    bool assigned_once;         /* the group has given this consumer an assignment (maybe empty) */
    uint64_t leave_deadline_ms; /* a close waits for the first assignment until then */
    bool keep_kafka;            /* rd_kafka_destroy would abort: the handle is not destroyed */
    bool kafka_stuck; /* librdkafka's close will never finish (assign_late in rebalance.c) */
    rl_consumer_close_cb close_cb;

    /* The offset map (partition_map.c): on when opts.offset_map_max_bytes is not 0; then the
     * consumer commits by itself (librdkafka's auto-committer cannot carry a map that changed
     * under an unchanged watermark). */
    bool map_read;              /* assignments read the committed maps */
    bool map_write;             /* commits carry maps (off once the broker refused one) */
    char *map_text;             /* a map being written: offset_map_max_bytes + 1 */
    rl__offset_span *map_spans; /* ... and its spans */
    size_t map_spans_cap;
    uint64_t next_commit_ms;       /* the next periodic commit */
    uint64_t commit_hold_until_ms; /* no periodic commit before: the group is rebalancing */
    bool commit_in_flight;         /* a periodic commit waits for its answer */
    rl__group_watch *watch;        /* the group's requests in flight (group_watch.c) */
    /* A cooperative revoke: librdkafka joins again right after the follow-on assign call, so
     * periodic commits wait for that join's answer (a JoinGroup answered after join_mark), or
     * until join_wait_until_ms. */
    bool join_expected;
    uint64_t join_mark, join_wait_until_ms;

    /* fetch_restart.c */
    uint64_t queued_min_messages; /* librdkafka's queued.min.messages for this consumer */
    bool fetch_stopped;           /* the queue reached it: librdkafka stopped fetching */
    /* The rate limit (intake_rate.c): on when opts.max_rate is set; the bucket, and the turn
     * that picks where rl__drain_all_pending starts, so that the tokens go round. */
    bool rate_on;
    rl__bucket bucket;
    uint64_t drain_turn;

    struct rl__growth_fence *fence; /* the growth fence (growth_fence.c), NULL when off */

    rl_consumer_stats stats;
    /* The statistics timer's memory, kept and reused (consumer_stats.c). */
    rl_consumer_partition_stats *stats_parts;
    size_t stats_parts_cap;
    char *stats_text;
    size_t stats_text_cap;
};

/* True on the thread that called rl_consumer_new. */
bool rl__consumer_on_loop(const rl_consumer_t *c);
uint64_t rl__now_ms(void);
void rl__consumer_error(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* consumer_stats.c: the dispatcher's stats timer ticks for the consumer (its on_stats), which
 * wraps the dispatcher's text in the consumer's; and the memory it keeps. */
void rl__consumer_stats_tick(rl_dispatcher_t *d, const char *json, size_t len);
void rl__consumer_stats_free(rl_consumer_t *c);

/* partitions.c */
rl__part *rl__part_get(rl_consumer_t *c, const char *topic, int32_t partition, bool create);
rl__part *rl__part_of_message(rl_consumer_t *c, const rd_kafka_message_t *m);
void rl__part_pause(rl_consumer_t *c, rl__part *p);
void rl__part_resume(rl_consumer_t *c, rl__part *p);
void rl__part_seek(rl_consumer_t *c, rl__part *p, int64_t offset);
void rl__fetch_restart_init(rl_consumer_t *c, rd_kafka_conf_t *conf);
void rl__fetch_restart_before_poll(rl_consumer_t *c);
void rl__fetch_restart_after_poll(rl_consumer_t *c, bool queue_empty);
void rl__topics_free(rl_consumer_t *c);

/* flow.c: messages in, jobs out */
void rl__on_message(rl_consumer_t *c, rd_kafka_message_t *m);
void rl__drain_pending(rl_consumer_t *c, rl__part *p);
void rl__drain_all_pending(rl_consumer_t *c);
void rl__complete(rl_consumer_t *c, rl__part *p, int64_t offset);
int rl__job_handler(rl_dispatcher_t *d, rl_dispatch_job *job);
void rl__stop_starts(rl__part *p); /* a revoke or loss begins: no handler call starts after */
void rl__job_async(rl_dispatcher_t *d, rl_dispatch_job *job);
int rl__job_batch_handler(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n, int *status);
void rl__job_async_batch(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n);
void rl__abandon(rl_consumer_t *c, rl__part *p);
void rl__job_done(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome);
void rl__on_capacity(rl_dispatcher_t *d);
void rl__cjob_free(rl__cjob *j);
/* The job holding p's watermark (its oldest unfinished offset), or NULL when none is known. */
const rl__cjob *rl__holder(const rl__part *p);

/* intake_rate.c: the rate limit at intake */
void rl__intake_init(rl_consumer_t *c); /* a full bucket, when opts.max_rate is set */
/* Takes a token for a message about to be dispatched; false (counted, and the timer set for
 * the next token) when the bucket is empty: keep the message. Always true without a limit. */
bool rl__intake_take(rl_consumer_t *c);
void rl__intake_give_back(rl_consumer_t *c); /* the message was not dispatched after all */

/* rebalance.c */
void rl__rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                      rd_kafka_topic_partition_list_t *parts, void *opaque);
void rl__commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                   rd_kafka_topic_partition_list_t *offsets, void *opaque);
void rl__store_watermarks(rl_consumer_t *c);
void rl__commit_maps(rl_consumer_t *c); /* with the offset map: the periodic commit */
/* At a close, before the consumer leaves the group: takes the queued jobs of its partitions back
 * (the next owner reads them again) and, on later calls, says whether the jobs in flight and
 * their dead letters have ended, or revoke_timeout_ms has passed since the first call. */
bool rl__drained_for_leaving(rl_consumer_t *c);
/* With the offset map, at a close once drained: commits every partition's offset and map before
 * the consumer leaves the group, so that its revoke has nothing left to commit. When consumers
 * close together a later one's commit meets the rebalance the first one's leaving started
 * (REBALANCE_IN_PROGRESS), and a revoke's commit, made while librdkafka is already leaving,
 * cannot be answered otherwise. So this one is retried until revoke_timeout_ms: after a
 * coordinator error, and, with the cooperative protocol, after REBALANCE_IN_PROGRESS once
 * librdkafka has joined the group's next generation. */
void rl__commit_before_leaving(rl_consumer_t *c);
void rl__revoke_timer_cb(uv_timer_t *t);
void rl__revoke_kick(rl_consumer_t *c); /* a job of a revoking partition ended: look again */
void rl__revoke_free(rl_consumer_t *c);

/* group_watch.c: the group's joins in flight (librdkafka interceptors) */
/* Makes c->watch and puts its interceptors in conf (RL_ENOMEM, RL_EKAFKA). librdkafka's threads
 * use it until the handle is destroyed: free it after rd_kafka_destroy, never before. */
int rl__group_watch_install(rl_consumer_t *c, rd_kafka_conf_t *conf);
void rl__group_watch_free(rl_consumer_t *c);
bool rl__group_joining(rl_consumer_t *c);
uint64_t rl__group_joins(rl_consumer_t *c);  /* JoinGroup answers so far */
uint64_t rl__group_beats(rl_consumer_t *c);  /* Heartbeat answers seen so far */
uint64_t rl__group_leaves(rl_consumer_t *c); /* LeaveGroup requests sent so far */

/* partition_map.c: the offset map of each partition */
int rl__map_init(rl_consumer_t *c); /* RL_ENOMEM */
void rl__map_free(rl_consumer_t *c);
bool rl__map_admits(rl_consumer_t *c, const rl__part *p, int64_t offset);
bool rl__map_skips(rl__part *p, int64_t offset);
/* The offset p's next commit carries (-1: nothing to commit) and its map (*len 0: none). */
int64_t rl__map_build(rl_consumer_t *c, rl__part *p, size_t *len);
/* At assignment: keeps the committed map if it is one of ours about the committed offset, else
 * counts and reports it. */
void rl__map_adopt(rl_consumer_t *c, rl__part *p, const rd_kafka_topic_partition_t *committed);
void rl__map_forget(rl__part *p);

/* growth_fence.c: the growth fence on the loop (its reader thread: growth_reader.c) */
enum { RL__GROWTH_FENCE_PASS = 0, RL__GROWTH_FENCE_BLOCK = 1, RL__GROWTH_FENCE_HOLD = 2 };
/* Makes c->fence and starts its reader with a copy of conf (the detail set on a refusal). */
int rl__growth_fence_new(rl_consumer_t *c, const rl_consumer_options *o,
                         const rd_kafka_conf_t *conf);
void rl__growth_fence_free(rl_consumer_t *c); /* stops the reader: after the consumer's handle */
/* Takes what the reader published (the records, the committed offsets) and lets go what they
 * release; `tick`: also tells the reader which committed offsets matter now. */
void rl__growth_fence_poll(rl_consumer_t *c, bool tick);
/* PASS: on as any message; BLOCK: keep it (its partition is held whole); HOLD: take it and
 * hold it (rl__growth_fence_hold) behind the earlier ones of its source partition *src. */
int rl__growth_fence_admit(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m,
                           uint32_t *src);
/* A message kept in its partition's queue (refused, or behind refused ones): counted in
 * growth_held when the partition is held whole. */
void rl__growth_fence_kept(rl_consumer_t *c, rl__part *p, const rd_kafka_message_t *m);
int rl__growth_fence_hold(rl_consumer_t *c, rl__part *p, rl__cjob *j, uint32_t src); /* RL_ENOMEM */
void rl__growth_fence_release(rl_consumer_t *c);
void rl__growth_fence_drop(rl_consumer_t *c,
                           rl__part *p); /* revoke, loss, close: never dispatched */
void rl__growth_fence_part_free(rl__part *p);
void rl__growth_fence_assigned(rl_consumer_t *c, rl__part *p);
/* Where a newly assigned partition starts: its committed offset, or (none, and made by a
 * growth) its beginning. */
int64_t rl__growth_fence_start(rl_consumer_t *c, rl__part *p, int64_t committed);
/* flow.c: a held job goes to its lane; RL_EAGAIN: the lanes (or the rate limit) refused. */
int rl__dispatch_held(rl_consumer_t *c, rl__part *p, rl__cjob *j);

/* dead_letter.c */
/* The dead-letter producer's configuration made from the consumer's: a copy without the
 * properties librdkafka marks consumer-only (a producer would log a CONFWARN for each), with
 * enable.idempotence=true. 0, or RL_ENOMEM / RL_EKAFKA with the reason in err. */
int rl__dlq_conf(const rd_kafka_conf_t *conf, rd_kafka_conf_t **out, char *err, size_t size);
int rl__dlq_new(rl_consumer_t *c, rd_kafka_conf_t *conf);
void rl__dead_letter(rl_consumer_t *c, rl__cjob *j);
void rl__dlq_retry(rl_consumer_t *c);
void rl__dlq_wait(rl_consumer_t *c, rl__part *const *parts, size_t n, uint64_t deadline_ms);
void rl__dlq_forget(rl_consumer_t *c, rl__part *p);
void rl__dlq_close(rl_consumer_t *c, uint32_t flush_ms);
void rl__dlq_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);

#endif
