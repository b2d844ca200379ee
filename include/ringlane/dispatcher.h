/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: the ordered dispatcher (library ringlane_dispatch, on libuv).
 *
 * A dispatcher is attached to a caller's uv_loop_t. It has N lanes; each lane is one FIFO queue
 * with at most one job in flight (or, with batch_max, one batch of one key's jobs: see
 * rl_dispatch_batch_fn). A job's key picks its lane through a consistent hash ring over
 * the lane names, so jobs with the same key run strictly in submission order (one at a time),
 * while jobs with different keys run in parallel on different lanes.
 *
 * What runs a job is a separate choice from the lane. A blocking handler (opts.handler) runs on
 * a worker thread of a pool: by default the pool has as many threads as there are lanes, so
 * every lane with work has a thread at once; with opts.workers = W it has W threads shared by
 * every lane. Either way a lane is served by at most one worker at a time, but not always the
 * same one: a lane's jobs (and a key's) may run on different threads, one after another, so
 * keep no per-lane state in thread-locals. An asynchronous
 * handler (opts.async_handler) runs on the loop thread, starts the work (a libuv request, say)
 * and returns; the job stays in flight, and its lane starts nothing else, until someone calls
 * rl_dispatch_complete with the job's ticket, from any thread. Lanes of an asynchronous
 * dispatcher cost memory only (no thread), so there can be many: RL_DISPATCH_LANES_MAX.
 *
 * Lanes can be added and removed at runtime, with every ring profile. A change never reorders,
 * loses or duplicates a job: jobs already queued for keys that change lane move to the new lane
 * in their original order, and the new lane does not start a moved key until the old lane has
 * finished that key's in-flight job. Which keys move is the profile's choice: most move only
 * the keys of the lane added or removed, but jump and balanced renumber the lanes after a
 * removed one, and envoy, maglev and (at some lane counts) ketama also move keys between lanes
 * that stay; those move the same way. Lanes whose keys do not move keep running. For lanes
 * that come and go, the "memento" profile moves only the changed lane's keys and spreads keys
 * evenly (docs/dispatcher.md, "Which profile for lanes").
 *
 * Threads: rl_dispatch_try_submit, rl_dispatch_submit, rl_dispatch_submit_many,
 * rl_dispatch_wait_tag, the statistics and rl_dispatch_get_data may be called from any thread.
 * Everything else (init, close, lane changes, rl_dispatch_take_tag) is called on the loop
 * thread, the thread that called rl_dispatch_init; elsewhere they return RL_ESTATE. Handlers
 * run on lane workers; every other callback runs on the loop thread. rl_dispatch_complete may
 * be called from any thread.
 *
 * Lifetime: the dispatcher is freed when close_cb returns. Calls from other threads that are in
 * progress while a close finishes (submitters blocked for room, wait_tag, statistics,
 * rl_dispatch_complete) are waited for: they return (RL_ECLOSED, or their answer) before
 * close_cb runs. A call that begins after close_cb has begun uses freed memory: have other
 * threads stop calling once a submission answers RL_ECLOSED (or once you have called close),
 * and join them before close_cb returns. A completion for a job still in flight is always in
 * time: the close waits for that job. A completion that comes later (a reply that arrives after
 * its attempt's job_timeout_ms, say) may come after close_cb: route such replies through a
 * pointer to the dispatcher that close_cb sets to NULL (under your own lock if they come from
 * other threads), and drop a reply that finds NULL. Inside close_cb `d` is still whole
 * (rl_dispatch_get_data, the statistics); once it returns, `d` is gone.
 *
 * The loop thread and its CPU: completions of blocking handlers wake the loop. While the loop
 * itself feeds the workers (it submitted jobs within its last 128 rounds of delivery), has a
 * core to spare beside every worker (workers + 1 <= uv_available_parallelism()) and jobs are
 * held, the loop, having delivered what had ended, waits up to 2 us for the next completion
 * rather than sleep: being woken costs both threads more than that. A wait that sees nothing
 * makes the loop skip waiting on its next 1, 2, 4 ... 64 wake-ups, so sparse completions cost
 * almost no waiting. One wake-up waits and delivers for at most 50 us (and at most 8 rounds
 * of completions that came without a wait), then the loop's other handles run.
 *
 * Errors come in this order: the arguments first (RL_EINVAL, then RL_EBADKEY for a key the
 * profile cannot hash), then the dispatcher's state (RL_ECLOSED, RL_ESTATE), then room.
 *
 * Every accepted job ends in exactly one on_done call: RL_DISPATCH_DONE (the handler returned
 * 0), RL_DISPATCH_DEAD (dead-lettered after max_attempts failures) or RL_DISPATCH_RETURNED
 * (handed back unprocessed: rl_dispatch_take_tag, or a close in RL_DISPATCH_STOP mode). For the
 * jobs of one key these calls arrive in submission order, with one exception: the jobs
 * rl_dispatch_take_tag hands back end at once, before the key's earlier jobs that it does not
 * hand back, which are the key's job already started (taken by a worker or in its handler; with
 * batches, up to batch_max jobs of one batch) and, when one key is submitted under more than one
 * tag, the key's queued jobs of other tags (those still run, in order, after the key's started
 * job).
 */
#ifndef RINGLANE_DISPATCHER_H
#define RINGLANE_DISPATCHER_H

#include "ringlane/common.h"
#include "ringlane/ring.h"

#include <stddef.h>
#include <stdint.h>

/* libuv's loop (uv_loop_t); include <uv.h> to make one. Not included here, so this header
 * builds under any feature-test macros (uv.h needs POSIX ones). */
struct uv_loop_s;

#ifdef __cplusplus
extern "C" {
#endif

#define RL_DISPATCH_LANES_MAX 1048576u /* lanes in one dispatcher (the ring's member limit) */
#define RL_DISPATCH_THREADS_MAX 1024u  /* worker threads: opts.workers, or lanes when it is 0 */

/* The names of the lanes made for you (opts.lanes NULL with lane_count N): "lane-0", "lane-1",
 * ..., "lane-<N-1>", the prefix and the lane's number in decimal without leading zeros. The
 * ordered consumer's default lanes are named the same way. A later rl_dispatch_add_lane may
 * use the next numbers ("lane-<N>"); a name already a lane is RL_EDUPNAME. */
#define RL_DISPATCH_LANE_PREFIX "lane-"

typedef struct rl_dispatcher rl_dispatcher_t;

/* A job as the handler and the callbacks see it. The dispatcher owns the memory; it stays valid
 * until on_done returns. The key itself is not kept: put it in `data` if the handler needs it. */
typedef struct rl_dispatch_job {
    void *data;        /* the caller's pointer, untouched */
    int64_t tag;       /* the caller's small integer (a partition number, say) */
    uint64_t hash;     /* the key's position on the ring */
    uint64_t seq;      /* submission order, dispatcher-wide, from 0 */
    uint32_t attempts; /* handler calls that have returned (0 in the first call) */
    int status;        /* the last handler result (0 before the first call) */
    uint64_t ticket;   /* asynchronous jobs: names the attempt in flight for rl_dispatch_complete
                          (a new one each attempt; 0 for blocking handlers) */
} rl_dispatch_job;

/* How a job ended (the `outcome` of on_done). */
enum rl_dispatch_outcome {
    RL_DISPATCH_DONE = 0,    /* the handler returned 0 */
    RL_DISPATCH_DEAD = 1,    /* max_attempts failures: dead-lettered; job->status = last error */
    RL_DISPATCH_RETURNED = 2 /* handed back unprocessed (take_tag, or close in STOP mode) */
};

/* How rl_dispatch_close treats queued jobs. */
enum rl_dispatch_close_mode {
    RL_DISPATCH_DRAIN = 0, /* run everything queued (with its retries), then stop */
    RL_DISPATCH_STOP = 1   /* finish the handler calls in progress, hand back the rest */
};

/* Runs on a worker thread. Returns 0 for success; anything else is a failure, retried after a
 * backoff with its key parked: the key's later jobs wait behind it, in order, and run after it;
 * the lane goes on with its other keys meanwhile. The wait is a timer on the loop; no thread
 * sleeps through it. */
typedef int (*rl_dispatch_handler_fn)(rl_dispatcher_t *d, rl_dispatch_job *job);
/* Runs on the loop thread and starts the job: the job is finished by
 * rl_dispatch_complete(d, job->ticket, status), from any thread, now (inside this call) or
 * later. Until then the job is in flight: its lane starts nothing else. Status 0 is success;
 * anything else a failure, retried like a blocking handler's. `job` stays valid until on_done
 * returns; keep the ticket, not the pointer, where a completion may come late. */
typedef void (*rl_dispatch_async_fn)(rl_dispatcher_t *d, rl_dispatch_job *job);
/* Batches (opts.batch_max > 1): the handler gets up to batch_max jobs at once, jobs[0..n-1],
 * one key's next jobs in its lane, of one tag, in submission order (so a key's order holds, and
 * take_tag and wait_tag see the batch as one job in flight). Jobs of other keys queued between
 * them stay queued, in their order; the lane looks at up to 8 x batch_max queued jobs for them,
 * and a job of the key with another tag ends the batch. Why one
 * key: a lane change that takes a key from a lane waits for that lane's key in flight behind
 * one fence (dispatcher/lane_change.c); a batch of one key needs no more than one job does.
 * Many keys share a lane only when keys outnumber lanes, so with the asynchronous default of
 * 65,536 lanes most lanes hold one key, and their batches are as long as their queues.
 *
 * The results: status[i] for jobs[i] (all 0 when the handler is called; 0 is success), or one
 * for the whole batch. The jobs before the first failed one end DONE, in order. The first
 * failed job is retried with its key parked (or dead-lettered after max_attempts, as a lone
 * job would be), and every job after it in the batch is given again, behind it: on the retry's
 * batch (or at once in a new batch when the failed job was dead-lettered), whatever its status
 * said, with its attempts unchanged. So a key's jobs never end before an earlier one, and a
 * handler may stop at the first failure (the statuses after it are not read); jobs it did
 * process after a failure are processed again (at least once). A failure of the whole batch (a
 * non-zero return, rl_dispatch_complete with a non-zero status, job_timeout_ms) is the failure
 * of its first job. The jobs in flight are not counted in lane_capacity (up to batch_max more
 * than it, then; max_jobs still bounds them all).
 *
 * Blocking: runs on a worker thread; returns 0 with the results in status[], or non-zero, the
 * status of every job of the batch. */
typedef int (*rl_dispatch_batch_fn)(rl_dispatcher_t *d, rl_dispatch_job *const *jobs, size_t n,
                                    int *status);
/* Asynchronous: runs on the loop thread and starts the batch; every job of it has the same
 * ticket. The batch is finished by rl_dispatch_complete (one status for every job) or
 * rl_dispatch_complete_batch (one per job), from any thread, now or later. The array is valid
 * only during the call; the jobs until their on_done returns. */
typedef void (*rl_dispatch_async_batch_fn)(rl_dispatcher_t *d, rl_dispatch_job *const *jobs,
                                           size_t n);
/* The most jobs in one batch (opts.batch_max); a worker keeps the batch on its stack. */
#define RL_DISPATCH_BATCH_MAX 1024u

/* On the loop thread, once per accepted job. */
typedef void (*rl_dispatch_done_cb)(rl_dispatcher_t *d, rl_dispatch_job *job, int outcome);
/* On the loop thread, after a submission was refused with RL_EAGAIN, once the lanes that were
 * full are at most half full again (and the dispatcher at most half its max_jobs, if that was
 * the limit; and a token is in the rate limit's bucket, if that was). It may fire more than
 * needed; a submission can still be refused afterwards. */
typedef void (*rl_dispatch_capacity_cb)(rl_dispatcher_t *d);
/* On the loop thread, when close has finished; the dispatcher is freed when it returns. */
typedef void (*rl_dispatch_close_cb)(rl_dispatcher_t *d);
/* On the loop thread, every stats_interval_ms: the statistics as JSON text (json[len] is its
 * NUL), valid only during the call (the buffer is reused). See stats_interval_ms. */
typedef void (*rl_dispatch_stats_cb)(rl_dispatcher_t *d, const char *json, size_t len);

/* The statistics on a timer (stats_interval_ms): the longest interval (a day, librdkafka's
 * limit for statistics.interval.ms), the busiest lanes the compact text lists by default, and
 * the most it may list. */
#define RL_DISPATCH_STATS_INTERVAL_MAX_MS 86400000
#define RL_DISPATCH_STATS_LANES 16u
#define RL_DISPATCH_STATS_LANES_MAX 1024u

/* The hot keys (opts.hot_keys): a sketch per dispatcher of the keys holding the most jobs
 * (queued, parked, or in flight: submitted and not yet ended). Its entries by default and at
 * most; the first RL_DISPATCH_HOT_KEY_BYTES bytes of a key are kept to name it; the bounded
 * statistics (the compact text of on_stats, rl_dispatch_stats_prometheus) list the
 * RL_DISPATCH_STATS_HOT_KEYS hottest. */
#define RL_DISPATCH_HOT_KEYS 64u
#define RL_DISPATCH_HOT_KEYS_MAX 4096u
#define RL_DISPATCH_HOT_KEY_BYTES 64u
#define RL_DISPATCH_STATS_HOT_KEYS 8u

typedef struct rl_dispatch_options {
    const char *const *lanes; /* lane names (ring members, weight 1); NULL: lane_count lanes named
                                 RL_DISPATCH_LANE_PREFIX "0" .. "<lane_count - 1>" */
    size_t lane_count;        /* at least one */
    const rl_ring_options *ring;         /* NULL = rl_ring_options_init() defaults */
    rl_dispatch_handler_fn handler;      /* blocking, on worker threads; or: */
    rl_dispatch_async_fn async_handler;  /* asynchronous, on the loop (exactly one of the two) */
    rl_dispatch_done_cb on_done;         /* NULL: jobs end silently */
    rl_dispatch_capacity_cb on_capacity; /* NULL: none */
    void *data;                          /* the caller's, see rl_dispatch_get_data */
    uint32_t lane_capacity; /* jobs one lane holds before RL_EAGAIN, queued or parked (behind a
                               moved key's job or a key's retry), the started job waiting for
                               its retry included; the job in flight is not counted, so when
                               it fails at a full lane the lane holds one more until the retry
                               starts (1024) */
    uint32_t max_jobs;      /* jobs held at once, queued to undelivered: the memory bound (65536) */
    uint32_t max_attempts;  /* handler calls before a job is dead-lettered (5) */
    uint32_t backoff_ms;    /* delay before the first retry, doubled each time (10) */
    uint32_t backoff_max_ms; /* the largest delay (1000) */
    uint32_t workers;        /* blocking handlers: 0 = a worker thread per lane (lanes up to
                                RL_DISPATCH_THREADS_MAX); W = a pool of W threads shared by all
                                lanes (1..RL_DISPATCH_THREADS_MAX) (0). Not for async_handler. */
    uint32_t job_timeout_ms; /* asynchronous handlers: an attempt not completed within it fails
                                with status RL_ETIMEDOUT (retried or dead-lettered like any
                                failure; its ticket is void); 0 = no limit (0) */
    /* Statistics on a timer, as librdkafka's statistics.interval.ms and stats_cb: every
     * stats_interval_ms (0 = off; 1..RL_DISPATCH_STATS_INTERVAL_MAX_MS) on_stats gets the JSON
     * on the loop thread. The timer does not keep the loop alive and stops when
     * rl_dispatch_close is called. By default the compact text: rl_dispatch_stats_json_bounded with
     * stats_lanes, so the totals, the removed lanes' counters and at most stats_lanes lanes, the
     * busiest first; with stats_full the text of rl_dispatch_stats_json (every lane: 11.5 MB at
     * 65,536 lanes, made on the loop). A tick allocates nothing once its text buffer (kept and
     * reused) has grown to the text's length. */
    int64_t stats_interval_ms;     /* (0) */
    rl_dispatch_stats_cb on_stats; /* required when stats_interval_ms is set */
    uint32_t stats_lanes;          /* lanes the compact text lists, 0..RL_DISPATCH_STATS_LANES_MAX
                                      (RL_DISPATCH_STATS_LANES) */
    int stats_full;                /* 1: every lane, not the compact text (0) */
    /* The rate limit: jobs accepted per second, counted at submission (a retry takes nothing),
     * by a token bucket of max_burst tokens that starts full and gains max_rate a second. A
     * submission that finds it empty is refused with RL_EAGAIN, as a full lane refuses
     * (rl_dispatch_submit waits for a token up to its timeout), and on_capacity is called
     * when the next token is due: a timer on the loop, set by the refusal; nothing sleeps and
     * nothing polls. 0 = no limit (0); else 0.001..1e9, with max_burst 1..4294967295. Over any
     * T seconds at most max_burst + max_rate x T jobs are accepted. The loop's timers have a
     * resolution of 1 ms: a producer that waits for on_capacity reaches max_rate when
     * max_burst holds at least 2 ms of it (max_rate x 0.002). Costs one mutex per submission
     * (every 64 items for rl_dispatch_submit_many) while set, nothing otherwise. */
    double max_rate;
    uint32_t max_burst; /* the most tokens the bucket holds: the jobs accepted at once (0) */
    /* The hot-key sketch: how many keys it follows (0 = off; 1..RL_DISPATCH_HOT_KEYS_MAX).
     * Fixed memory, made at init: 88 bytes per entry, 4 for its place on the free list and 8
     * for its two index places: 6.4 KB at 64, 400 KB at RL_DISPATCH_HOT_KEYS_MAX. Every
     * submission and every batch of ends counts its keys under one short lock of the sketch
     * (see rl_dispatch_hot_keys). (RL_DISPATCH_HOT_KEYS) */
    uint32_t hot_keys;
    /* Batches (see rl_dispatch_batch_fn): one of these instead of handler / async_handler, and
     * batch_max, the most jobs per call (0 and 1: one job per call;
     * 2..RL_DISPATCH_BATCH_MAX). batch_max over 1 needs a batch handler. */
    rl_dispatch_batch_fn batch_handler;             /* blocking, on worker threads */
    rl_dispatch_async_batch_fn async_batch_handler; /* asynchronous, on the loop */
    uint32_t batch_max;                             /* (0) */
} rl_dispatch_options;

/* Fills opts with the defaults in parentheses above and everything else NULL / 0. */
RL_EXTERN void rl_dispatch_options_init(rl_dispatch_options *opts);

/* Creates a dispatcher on `loop` and starts its worker threads (none for an asynchronous
 * handler). Call on the loop thread.
 * Errors: RL_EINVAL (NULL loop, opts or out, not exactly one of handler, async_handler,
 * batch_handler and async_batch_handler, batch_max over 1 without a batch handler,
 * lane_count 0 (lanes NULL too: no lanes), a NULL name in lanes, a zero lane_capacity, max_jobs
 * or max_attempts, backoff_max_ms < backoff_ms, workers or job_timeout_ms with the other kind of
 * handler, stats_interval_ms negative or over RL_DISPATCH_STATS_INTERVAL_MAX_MS, or set
 * without on_stats, stats_lanes over RL_DISPATCH_STATS_LANES_MAX; max_rate NaN, infinite,
 * negative or outside 0.001..1e9, max_burst 0 with max_rate set or set without it), RL_ERANGE
 * (batch_max over RL_DISPATCH_BATCH_MAX; over RL_DISPATCH_LANES_MAX lanes; over
 * RL_DISPATCH_THREADS_MAX workers, or lanes with workers = 0), RL_ENAME, RL_EDUPNAME,
 * RL_EPROFILE, RL_EVNODES, RL_ENOTSUP, RL_ETOOBIG and any other error rl_ring_build gives for
 * the lane names and opts->ring, RL_ENOMEM (also a worker thread that could not be started),
 * RL_ELOOP (libuv failed). A refusal leaves *out NULL and nothing allocated, and says why in
 * rl_last_error_detail(): the option as written in C, the value, the reason, e.g.
 * "lane_capacity 0: a lane must hold at least one job (1..4294967295)"; the ring's refusals
 * come as "lanes[3] ..." or "ring->vnodes ...". */
RL_EXTERN int rl_dispatch_init(struct uv_loop_s *loop, const rl_dispatch_options *opts,
                               rl_dispatcher_t **out);

/* The options' data pointer (NULL for a NULL dispatcher). */
RL_EXTERN void *rl_dispatch_get_data(const rl_dispatcher_t *d);

/* Queues a job for `key` (key_len bytes; NULL with key_len 0 is the empty key, a key like any
 * other) without waiting. RL_EAGAIN: the key's lane holds lane_capacity jobs (queued or parked:
 * the backlog of a key parked for a retry takes its lane's room, as queued jobs do),
 * or the dispatcher holds max_jobs, or the rate limit's bucket is empty (see on_capacity).
 * RL_ECLOSED after close; RL_ESTATE when there is no lane; RL_EBADKEY if the ring's profile cannot
 * hash the key; RL_EINVAL; RL_ENOMEM. Never blocks on capacity; it only takes short locks. */
RL_EXTERN int rl_dispatch_try_submit(rl_dispatcher_t *d, const void *key, size_t key_len,
                                     void *data, int64_t tag);

/* As rl_dispatch_try_submit, but waits up to timeout_ms (negative: no limit; any positive value
 * works, INT64_MAX included; 0 tries once more) for room, then RL_ETIMEDOUT. On the loop thread,
 * and inside a handler of the same dispatcher, it never waits (it would wait for itself) and
 * answers like rl_dispatch_try_submit. */
RL_EXTERN int rl_dispatch_submit(rl_dispatcher_t *d, const void *key, size_t key_len, void *data,
                                 int64_t tag, int64_t timeout_ms);

/* One job of rl_dispatch_submit_many: the arguments of one rl_dispatch_try_submit. */
typedef struct rl_dispatch_item {
    const void *key;
    size_t key_len;
    void *data;
    int64_t tag;
} rl_dispatch_item;

/* Queues n jobs without waiting, as rl_dispatch_try_submit would one after another, but taking
 * each lane's lock once for all of its items in every 64. A refusal cuts the item's lane for
 * the rest of the call: every later item bound for that lane gets the same answer, so the jobs
 * queued for a key are always the first of its items (none is skipped while a later one is
 * queued). A refusal by max_jobs cuts every lane. Sequence numbers rise with each key's order;
 * within a call, jobs of different lanes may number in another order than their items.
 * status, when not NULL, has room for n answers: status[i] is 0 when items[i] was queued, else
 * the error rl_dispatch_try_submit would give (RL_EAGAIN, RL_EBADKEY, RL_EINVAL, RL_ENOMEM,
 * RL_ECLOSED, RL_ESTATE). *queued (may be NULL) is how many were queued.
 * Returns 0 when all n were queued; else the answer of the first item refused, in item order.
 * Pass `status` to resend only what was refused: without it a partial refusal does not say
 * which items went in (resending all of them would queue some twice).
 * RL_EINVAL, with nothing queued, for a NULL d, or NULL items with n > 0. Any thread. */
RL_EXTERN int rl_dispatch_submit_many(rl_dispatcher_t *d, const rl_dispatch_item *items, size_t n,
                                      int *status, size_t *queued);

/* Adds a lane and moves to it the keys the ring gives it, with their queued jobs (in order).
 * With workers = 0 it starts the lane's worker thread. Errors: RL_EINVAL (NULL d or name),
 * RL_EDUPNAME, RL_ENAME, RL_ERANGE (lane or thread limit), RL_ECLOSED, RL_ESTATE (not the loop
 * thread), RL_ENOMEM, RL_ELOOP, and what rl_ring_add gives for the ring (ketama: a name that is
 * not HOST:PORT; RL_ETOOBIG); on error nothing changed, and rl_last_error_detail() says why
 * ("name \"lane-5\": already a lane"). */
RL_EXTERN int rl_dispatch_add_lane(rl_dispatcher_t *d, const char *name);

/* Removes a lane: its keys and queued jobs move to the lanes the ring now gives them, in order
 * (and so do other lanes' keys that the profile moves); its worker finishes its in-flight job
 * and stops. Errors: RL_EINVAL (NULL d or name), RL_ENOENT, RL_EBUSY (the last lane while any
 * job is left: queued, in flight, parked for a retry, or waiting behind a removed lane's job;
 * nothing changes, nothing is lost), RL_ECLOSED, RL_ESTATE, RL_ENOMEM, each with its detail in
 * rl_last_error_detail() ("name \"zz\": no such lane"). With the last lane gone submissions
 * answer RL_ESTATE until a lane is added. */
RL_EXTERN int rl_dispatch_remove_lane(rl_dispatcher_t *d, const char *name);

/* Finishes the asynchronous attempt named by `ticket` (job->ticket, as the async handler saw
 * it): status 0 is success, anything else a failure. Any thread, inside the async handler too,
 * and also while a close waits for jobs in flight. RL_ESTALE when no attempt waits for this
 * ticket: it was completed already, its job_timeout_ms passed, its job was handed back or
 * dead-lettered, or it was never given; nothing changes then. RL_EINVAL (NULL d, ticket 0),
 * RL_ESTATE (a dispatcher of blocking handlers). */
RL_EXTERN int rl_dispatch_complete(rl_dispatcher_t *d, uint64_t ticket, int status);

/* Finishes the asynchronous batch named by `ticket` with a status per job: status[i] for the
 * batch's jobs[i], n the batch's length (see rl_dispatch_batch_fn for what a failure does).
 * As rl_dispatch_complete otherwise (a batch of one: status[0]). RL_EINVAL (NULL d or status,
 * ticket 0, or n not the batch's length: nothing changes then, the ticket still waits),
 * RL_ESTALE, RL_ESTATE (blocking handlers). Any thread. */
RL_EXTERN int rl_dispatch_complete_batch(rl_dispatcher_t *d, uint64_t ticket, const int *status,
                                         size_t n);

/* Removes every job with `tag` that has not started (queued, waiting on a lane change, or
 * waiting for a retry between attempts) and ends each with on_done(RL_DISPATCH_RETURNED) before
 * returning, in submission order. A job has started once a worker (or, for an asynchronous
 * handler, the loop) has taken it from its lane to call the handler, even if that call has not
 * begun yet; take_tag does not wait for started jobs (rl_dispatch_wait_tag does). Jobs of the same
 * keys that finished before it looked end first (also when it is called from inside on_done). After
 * a close in RL_DISPATCH_STOP mode it hands back at once the tag's jobs the close would hand back
 * when it finishes; during a close in RL_DISPATCH_DRAIN mode it still hands back the tag's queued
 * jobs (they do not run). *count (may be NULL) gets how many this call took. Called from inside
 * an on_done of jobs being handed back (another take_tag's, or a STOP close's when it finishes),
 * it first ends the rest of those jobs, its own tag's among them, in order, and does not count
 * them: they end before the ones it takes. Inside a STOP close's final hand-back nothing is left
 * to take, so it answers 0 although jobs of its tag end during the call. Submissions wait while
 * it looks at the lanes. Loop thread only. */
RL_EXTERN int rl_dispatch_take_tag(rl_dispatcher_t *d, int64_t tag, size_t *count);

/* Waits up to timeout_ms (any value: UINT64_MAX waits without a limit) until no job with `tag`
 * is in flight (in its handler, or waiting for a retry: rl_dispatch_take_tag hands those back;
 * a job that is in its handler when take_tag looks is waited for through all its attempts,
 * unless a later take_tag finds it waiting for a retry: that call hands it back, so its
 * RL_DISPATCH_RETURNED comes after those of its key's later jobs the first call handed back).
 * On the loop thread it then delivers the finished jobs' on_done calls before returning 0 (and,
 * after a close in RL_DISPATCH_STOP mode, hands back the tag's jobs the close holds, a job
 * stopped in its retry delay among them), so every job with the tag has ended once
 * rl_dispatch_take_tag and this have returned 0 (and no new one was submitted). RL_ETIMEDOUT
 * otherwise (the jobs still end later, through on_done). From another thread it only waits.
 * From a handler whose own job has `tag`: RL_ESTATE (it would wait for itself). It waits for
 * jobs of `tag` submitted after take_tag as well: while the tag is still being submitted, a wait
 * without a limit may not return. On the loop thread, while it waits, it runs the dispatcher's
 * own retry timers (and, with an asynchronous handler, starts ready jobs), but none of the
 * loop's other handles: an asynchronous job completed from one of them cannot end meanwhile, so
 * wait there with timeout 0, or from another thread. */
RL_EXTERN int rl_dispatch_wait_tag(rl_dispatcher_t *d, int64_t tag, uint64_t timeout_ms);

/* Starts closing: new submissions get RL_ECLOSED; blocked submitters wake with RL_ECLOSED. In
 * DRAIN mode every queued job still runs; in STOP mode only the handler calls in progress
 * finish (asynchronous jobs in flight included: the close waits for their completion, or their
 * job_timeout_ms) and the queued jobs and those waiting for a retry are handed back
 * (RL_DISPATCH_RETURNED, in submission order). When
 * every worker has stopped, every job has ended and every call from another thread has
 * returned, cb (may be NULL) runs on the loop thread and the dispatcher is freed when it
 * returns (see Lifetime above). Errors: RL_EINVAL, RL_ESTATE, RL_ECLOSED (already closing). */
RL_EXTERN int rl_dispatch_close(rl_dispatcher_t *d, int mode, rl_dispatch_close_cb cb);

/* --- statistics: per lane, and the hot keys (rl_dispatch_hot_keys) --- */
typedef struct rl_dispatch_lane_stats {
    char name[RL_NAME_MAX + 1];
    int retiring;           /* removed, finishing its in-flight job */
    uint64_t depth;         /* jobs queued */
    uint64_t parked;        /* jobs waiting behind a key's job elsewhere: of moved keys, for
                               their old lane's job in flight; of keys parked for a retry,
                               for it (the retrying job included) */
    uint64_t retry_parked;  /* keys parked here for a retry */
    uint64_t in_flight;     /* jobs in their handler or pending their completion: 0 or 1,
                               up to batch_max with batches */
    uint64_t processed;     /* jobs ended here: done + dead-lettered */
    uint64_t failed;        /* handler calls that failed */
    uint64_t retried;       /* retries scheduled */
    uint64_t dead_lettered; /* jobs dead-lettered */
    double p50_us, p99_us;  /* submission to end of last handler call, microseconds */
} rl_dispatch_lane_stats;

/* The counters of lanes removed and gone (no longer retiring): a lane's counters move here when
 * it is freed, so that the lanes' counters and these add up to the dispatcher's:
 * sum(lane processed) + removed.processed = done + dead_lettered, once nothing is in flight. */
typedef struct rl_dispatch_removed_stats {
    uint64_t lanes;         /* lanes removed and freed */
    uint64_t processed;     /* their jobs ended: done + dead-lettered */
    uint64_t failed;        /* their handler calls that failed */
    uint64_t retried;       /* their retries scheduled */
    uint64_t dead_lettered; /* their jobs dead-lettered */
} rl_dispatch_removed_stats;

typedef struct rl_dispatch_stats {
    size_t lanes;       /* lanes in the ring */
    size_t retiring;    /* removed lanes still finishing */
    uint64_t jobs;      /* jobs held now (towards max_jobs; never above it, at times above what is
                           held: places come back to max_jobs a few at a time) */
    uint64_t submitted; /* accepted */
    uint64_t refused;   /* refusals for room: RL_EAGAIN answers, and each attempt a blocking
                           submit made before it got in or gave up */
    uint64_t rate_limited; /* of those, the refusals by the rate limit (max_rate) */
    uint64_t done, dead_lettered, returned; /* on_done calls by outcome */
    uint64_t lane_changes;                  /* successful add_lane / remove_lane */
    uint64_t last_change_ns; /* how long the last change held submissions and moved keys */
    uint64_t max_change_ns;  /* the longest such hold so far */
    rl_dispatch_removed_stats removed; /* lanes removed and gone, read with the lanes */
} rl_dispatch_stats;

/* Fills *out and up to `cap` lane entries (ring lanes in node order, then retiring lanes);
 * *n (may be NULL) gets the number of lanes there are, which may exceed cap. The counters are
 * read one after another while jobs go on, not frozen together; but a snapshot never shows more
 * jobs ended than accepted (done + dead_lettered + returned <= submitted). */
RL_EXTERN int rl_dispatch_stats_get(rl_dispatcher_t *d, rl_dispatch_stats *out,
                                    rl_dispatch_lane_stats *lanes, size_t cap, size_t *n);

/* The same as one JSON object, NUL-terminated, like snprintf: *len (may be NULL) gets the length
 * the whole text needs (without the NUL); with cap too small the text is cut and RL_ERANGE is
 * returned. */
RL_EXTERN int rl_dispatch_stats_json(rl_dispatcher_t *d, char *buf, size_t cap, size_t *len);

/* The same JSON with at most max_lanes entries in "lane", for dispatchers with many lanes: with
 * at most max_lanes lanes, every lane ("lane_list": "all"); with more, only the lanes holding a
 * job (queued, in flight, parked or retry parked; and every retiring lane), the max_lanes
 * busiest of them (most jobs held: queued + parked + in flight), busiest first ("lane_list":
 * "busy"; "lanes_busy" counts them all). The idle lanes are not looked at: the cost follows the
 * lanes that got a job since the last lane change. The busy lanes change from one call to the
 * next, so the length may too. Both texts carry "removed_lanes", the counters of removed lanes
 * (rl_dispatch_removed_stats), so that with every lane listed the lanes' "processed" and
 * removed_lanes' add up to done + dead_lettered once nothing is in flight.
 * Both carry "hot_keys" (see rl_dispatch_hot_keys): the sketch's "capacity", the keys it
 * "followed" now, its "rounds", and in "list" the RL_DISPATCH_STATS_HOT_KEYS hottest (every one
 * in rl_dispatch_stats_json), each {"key", "key_encoding": "text" or "hex", "key_len" (the
 * whole key's), "jobs", "lane"}: a key whose first 64 bytes are printable ASCII as it is
 * (escaped), any other in hex (its first 32 bytes), a longer key cut and ended with "...".
 * The size: at most 1,000 bytes + max_lanes x (330 bytes + the lane name as a JSON string) +
 * RL_DISPATCH_STATS_HOT_KEYS x (225 bytes + a lane name as a JSON string); with names
 * "lane-<n>" and max_lanes RL_DISPATCH_STATS_LANES (the compact text of on_stats), under
 * 8.4 KB at any lane count (3.1 KB measured at 65,536 lanes, most of them busy, before the
 * hot keys; the 8 hot keys add under 2 KB, 0.5 KB with keys of 10 bytes). Its cost
 * follows the busy lanes: 20 us at 65,536 idle lanes, 3.5-4.3 ms with 62,000 of them busy. */
RL_EXTERN int rl_dispatch_stats_json_bounded(rl_dispatcher_t *d, size_t max_lanes, char *buf,
                                             size_t cap, size_t *len);

/* A key the hot-key sketch follows, as rl_dispatch_hot_keys reports it. */
typedef struct rl_dispatch_hot_key {
    uint64_t hash;  /* the key's position on the ring */
    uint64_t jobs;  /* its jobs held: queued, parked and in flight (a lower bound, below) */
    size_t key_len; /* the key's whole length */
    size_t stored;  /* the bytes of it kept in `key`: min(key_len, RL_DISPATCH_HOT_KEY_BYTES) */
    unsigned char key[RL_DISPATCH_HOT_KEY_BYTES];
    char lane[RL_NAME_MAX + 1]; /* the lane the ring gives the key now ("" with no lane) */
} rl_dispatch_hot_key;

/* The keys holding the most jobs, hottest first: up to `cap` entries in out, *n (may be NULL)
 * gets how many the sketch follows now (at most opts.hot_keys).
 *
 * The sketch is Misra-Gries's with departures: opts.hot_keys entries, each a key's hash, its
 * count and its first bytes, found by its hash in an index. A submission adds one to its
 * key's entry, or takes a free entry; when every entry is taken it takes one from every entry
 * instead (a "round": the new job is not counted, entries that reach 0 are freed). A job's end
 * takes one from its key's entry. So a count is never above the key's jobs held, and falls
 * short of it by at most the rounds made while they were held; a round needs hot_keys + 1
 * submissions, so a key holding more than 1 / (hot_keys + 1) of the jobs submitted meanwhile
 * is always listed. O(1) per submission and end, amortized (a round costs hot_keys + the
 * index, paid by the hot_keys + 1 submissions it forgets). RL_EINVAL (NULL d, NULL out with
 * a cap), RL_ENOMEM. With hot_keys 0: 0 and *n 0. Any thread. */
RL_EXTERN int rl_dispatch_hot_keys(rl_dispatcher_t *d, rl_dispatch_hot_key *out, size_t cap,
                                   size_t *n);

/* The statistics in the Prometheus text exposition format (version 0.0.4), for a scrape
 * endpoint (examples/metrics_http.c serves it): families named ringlane_dispatch_*, each with
 * its "# HELP" and "# TYPE" lines then its samples, counters ending in _total; the totals, the
 * removed lanes' counters, and per lane (label lane, escaped) the lanes
 * rl_dispatch_stats_json_bounded lists for the same max_lanes (every lane up to max_lanes,
 * else the max_lanes busiest), and the RL_DISPATCH_STATS_HOT_KEYS hottest keys as
 * ringlane_dispatch_hot_key_jobs{key, key_encoding, lane} (keys shown as in the JSON).
 * docs/operations.md lists every metric. Like snprintf: *len (may be NULL) gets the length the
 * whole text needs (without the NUL); with cap too small the text is cut, terminated, and RL_ERANGE
 * is returned. The size: about 2.9 KB + max_lanes x (640 bytes + 11 x the lane name's escaped
 * length) + 0.5 KB + RL_DISPATCH_STATS_HOT_KEYS x (215 bytes + the lane name's escaped length); 15
 * KB for 16 lanes named "lane-<n>", 17 KB with 8 hot keys of 64 bytes. RL_EINVAL (NULL d, NULL buf
 * with a cap), RL_ENOMEM. Any thread. */
RL_EXTERN int rl_dispatch_stats_prometheus(rl_dispatcher_t *d, size_t max_lanes, char *buf,
                                           size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
