/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: the ordered Kafka consumer (library ringlane_consumer: librdkafka + the dispatcher).
 *
 * A consumer joins a consumer group, polls its partitions and hands each message to an ordered
 * dispatcher (ringlane/dispatcher.h) by key: messages with the same key run one at a time in
 * partition order, different keys run in parallel on the dispatcher's lanes. It commits, per
 * partition, the watermark: the offset below which every message has completed (handled, or
 * delivered to the dead-letter topic), and in the commit's metadata the offset map: which later
 * offsets have completed too. Delivery is at-least-once: a commit never passes or records an
 * unfinished message; the next owner starts at the watermark, skips what the map records and
 * handles the rest again.
 *
 * The consumer lives on a caller's uv_loop_t, like the dispatcher. Everything runs on the loop
 * thread (the thread that called rl_consumer_new), including librdkafka's rebalance and commit
 * callbacks, except a blocking handler, which runs on the lane workers. librdkafka wakes the
 * loop when its queue has something (no busy polling); the loop then polls in bounded batches.
 *
 * Two kinds of handler (exactly one): a blocking `handler` runs on a worker thread and returns
 * the result (one thread per lane, or dispatch.workers threads shared by all lanes); an
 * asynchronous `async_handler` runs on the loop thread, starts the work and returns, and the
 * message ends later with rl_consumer_complete(c, ticket, status) from any thread. Lanes of an
 * asynchronous consumer are not threads, so there can be many (RL_CONSUMER_ASYNC_LANES by
 * default): the messages in flight at once are at most the lanes, one per lane.
 *
 * Backpressure: when the dispatcher refuses a message (its lane is full), the partition's
 * window of offsets in flight is full, or the rate limit has no token (max_rate), the message is
 * kept, and so is every later message of its partition, in order; when pending_max are kept the
 * partition is paused. When the lanes have room again the kept messages are submitted first, and
 * the partition resumes once half of them are gone. librdkafka drops the messages it had fetched
 * for a paused partition and fetches them again on resume, from the offset after the last one
 * polled, so nothing is lost, reordered or taken twice.
 *
 * Rebalance (eager and cooperative alike): for a revoked partition the queued messages are taken
 * back from the lanes (not processed here: the next owner reads them again), the ones in flight
 * are waited for up to revoke_timeout_ms, the watermark is committed synchronously, and only
 * then is the partition released. The group may refuse that commit (ILLEGAL_GENERATION or
 * REBALANCE_IN_PROGRESS, common when cooperative members come and go: the group has moved on)
 * or not answer within revoke_timeout_ms: the partition is released all the same
 * (commit_failures counts it, on_error says "commit failed" or "commit on revoke timed out"),
 * and its next owner reads again from the last offset the group did commit, so messages handled
 * since are handled twice (at-least-once). An assignment epoch makes completions that arrive
 * after the revoke count for nothing. Lost partitions (the group moved on without us) commit
 * nothing. Once a revoke or loss begins, no handler call for the partition's messages starts:
 * one a lane worker had taken but not yet called the handler for is dropped unhandled
 * (stats.stale; the next owner reads it), and a call already under way runs to its end (a
 * loss does not wait for it).
 * With a blocking handler the revoke waits inside librdkafka's rebalance callback. With an
 * asynchronous one it cannot (the completions may come from the loop it would block): the
 * callback takes the queued messages back and returns without releasing the partitions, the
 * loop runs on while librdkafka's group waits for the release (it keeps heartbeating and has
 * paused the assignment's fetching), and the partitions are released when their messages in
 * flight have ended or revoke_timeout_ms has passed. Those still in flight then are abandoned:
 * their tickets answer RL_ESTALE and their results count for nothing.
 *
 * Dead letters: a message the handler fails max_attempts times, and a message the bad-input
 * policy refuses, is produced to the dead-letter topic with its key, value and headers plus
 * headers naming where it came from and why (ringlane.topic, ringlane.partition,
 * ringlane.offset, ringlane.error, ringlane.attempts). Its offset counts as done only when the
 * dead-letter topic acknowledged it. If that produce fails, it is produced again every
 * dlq_retry_ms while the partition keeps flowing (until its window fills and it pauses); its
 * offset is never committed meanwhile, so a revoke or crash hands it to the next owner, which
 * dead-letters it again. A dead-letter producer that reports a fatal error (the default one is
 * idempotent: OUT_OF_ORDER_SEQUENCE_NUMBER is fatal to it) is replaced by a new one made from
 * the same configuration, at most once per dlq_retry_ms, which produces the waiting dead
 * letters again (on_error says so; dlq_producer_restarts counts it).
 *
 * Bad input: a message without a key (NULL or empty) is, by default, dispatched under a key
 * that stands for its partition, so keyless messages keep their partition's order among
 * themselves (RL_CONSUMER_NULL_KEY_PARTITION); RL_CONSUMER_NULL_KEY_DEAD_LETTER dead-letters
 * them instead. A key longer than max_key_len, or one the dispatcher's ring profile cannot hash,
 * is dead-lettered with the reason; the handler never sees it.
 */
#ifndef RINGLANE_CONSUMER_H
#define RINGLANE_CONSUMER_H

#include "ringlane/common.h"
#include "ringlane/dispatcher.h"

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>

struct uv_loop_s;

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_consumer rl_consumer_t;

/* The lanes an asynchronous consumer makes when none are given, and their ring's profile when
 * dispatch.ring is NULL too. A lane holds at most one message in flight, so with asynchronous
 * work the lanes are the concurrency, and keys that share a lane wait for each other: a busy key
 * shares its lane with another of K busy keys with a chance of about 1 - e^(-K/lanes), 1.5% for
 * K = 1,000 and 14% for K = 10,000 on 65,536 lanes (62% and 99.99% on 1,024). With "memento"
 * 65,536 lanes take about 23 ms to make, 468 B each when idle (30 MB), about 4 ms per lane
 * change, and no more loop CPU per message than 1,024 (docs/consumer.md, "Asynchronous
 * handlers"). A caller who gives dispatch.ring but no lanes gets RL_CONSUMER_ASYNC_LANES_RING
 * lanes: most profiles build every point, and 65,536 lanes of "default" take about 1 s to make
 * and 4.4 KB each. */
#define RL_CONSUMER_ASYNC_LANES 65536u
#define RL_CONSUMER_ASYNC_PROFILE "memento"
#define RL_CONSUMER_ASYNC_LANES_RING 1024u

/* rl_consumer_stats_json lists every lane of the dispatcher up to this many lanes; above, only
 * the lanes that hold a message (queued, in flight, parked, or removed and finishing), at most
 * this many (rl_dispatch_stats_get on rl_consumer_dispatcher lists them all, from any thread). */
#define RL_CONSUMER_STATS_LANES_MAX 1024u

/* The growth fence's ring profile when growth_profile is NULL: the partitioner's default
 * (RL_KAFKA_DEFAULT_PROFILE). */
#define RL_CONSUMER_GROWTH_PROFILE "balanced"

/* Where messages without a key go. */
enum rl_consumer_null_key {
    RL_CONSUMER_NULL_KEY_PARTITION = 0,  /* dispatched by partition, in partition order */
    RL_CONSUMER_NULL_KEY_DEAD_LETTER = 1 /* dead-lettered ("no key") */
};

/* What a rebalance notification says happened to its partitions. With cooperative-sticky the
 * lists are incremental (what was added or taken away this time; an ASSIGNED list may be
 * empty), with eager assignors whole. A consumer that is closing may still be handed a
 * partition (ASSIGNED) and give it back at once (REVOKED) as it leaves. */
enum rl_consumer_rebalance {
    RL_CONSUMER_ASSIGNED = 0, /* now ours */
    RL_CONSUMER_REVOKED = 1,  /* released after waiting and committing */
    RL_CONSUMER_LOST = 2      /* taken away without a revoke: nothing was committed */
};

/* Runs on a lane worker. msg is valid until the handler returns; attempt counts the calls of
 * this message, from 1. Returns 0 for success; anything else is a failure, retried (see
 * rl_dispatch_options) and dead-lettered after max_attempts. */
typedef int (*rl_consumer_handler_fn)(rl_consumer_t *c, const rd_kafka_message_t *msg,
                                      uint32_t attempt);
/* Runs on the loop thread and starts the handling of msg (attempt counts from 1); the message
 * ends when rl_consumer_complete(c, ticket, status) is called, from any thread, inside this
 * call or later. Until then its lane starts nothing else. A failure (status != 0) is retried
 * with a new ticket and dead-lettered after max_attempts, as for a blocking handler. The
 * consumer keeps msg (it owns it) while the ticket is valid: until rl_consumer_complete for it,
 * or until the ticket turns stale (dispatch.job_timeout_ms passed, or its partition was lost,
 * or revoked and revoke_timeout_ms passed); work that may outlive those copies what it needs. */
typedef void (*rl_consumer_async_fn)(rl_consumer_t *c, const rd_kafka_message_t *msg,
                                     uint32_t attempt, uint64_t ticket);
/* Batches (dispatch.batch_max over 1; see rl_dispatch_batch_fn): up to batch_max messages of
 * one key and one partition, msgs[0..n-1] in offset order, at once. status[i] is msgs[i]'s
 * result (all 0 when the handler is called), or the return value fails the whole batch. The
 * messages before the first failed one complete; the failed one is retried (or dead-lettered)
 * as a lone message would be, and the messages after it come again behind it, whatever their
 * status said: a key's messages never complete out of order. Commits are unchanged: each
 * message completes its offset, and the watermark moves as with one message per call. */
typedef int (*rl_consumer_batch_fn)(rl_consumer_t *c, const rd_kafka_message_t *const *msgs,
                                    size_t n, int *status);
/* Asynchronous batches: on the loop thread, starts the batch; one ticket names it, ended by
 * rl_consumer_complete (one status for all) or rl_consumer_complete_batch (one per message).
 * The array is valid during the call; the messages while the ticket is (as async_handler's). */
typedef void (*rl_consumer_async_batch_fn)(rl_consumer_t *c, const rd_kafka_message_t *const *msgs,
                                           size_t n, uint64_t ticket);
/* On the loop thread, after the assignment changed (ASSIGNED) or before the partitions are
 * released (REVOKED, LOST). */
typedef void (*rl_consumer_rebalance_cb)(rl_consumer_t *c, int event,
                                         const rd_kafka_topic_partition_list_t *partitions);
/* On the loop thread, when a dead letter was delivered (or, with no dead-letter topic, when it
 * was dropped). reason is the text of the ringlane.error header. */
typedef void (*rl_consumer_dead_letter_cb)(rl_consumer_t *c, const rd_kafka_message_t *msg,
                                           const char *reason);
/* On the loop thread: librdkafka errors (from polls, commits, the dead-letter producer). */
typedef void (*rl_consumer_error_cb)(rl_consumer_t *c, rd_kafka_resp_err_t err, const char *reason);
/* On the loop thread, when close has finished; the consumer is freed when it returns. */
typedef void (*rl_consumer_close_cb)(rl_consumer_t *c);
/* On the loop thread, every stats_interval_ms: the statistics as JSON text (json[len] is its
 * NUL), valid only during the call (the buffer is reused). See stats_interval_ms. */
typedef void (*rl_consumer_stats_cb)(rl_consumer_t *c, const char *json, size_t len);

typedef struct rl_consumer_options {
    /* The consumer's librdkafka configuration: bootstrap.servers, group.id (required),
     * partition.assignment.strategy and anything else. rl_consumer_new takes it over, on
     * success and on failure. It sets enable.auto.offset.store=false, enable.auto.commit
     * (true without the offset map; with it the consumer commits by itself, so false),
     * auto.commit.interval.ms (commit_interval_ms), the rebalance, offset-commit and error
     * callbacks and the opaque: do not set those. */
    rd_kafka_conf_t *conf;
    const char *const *topics; /* to subscribe to (librdkafka syntax: "^regex" works) */
    size_t topic_count;
    rl_consumer_handler_fn handler;     /* blocking, on the lane workers; or: */
    rl_consumer_async_fn async_handler; /* asynchronous, on the loop (exactly one of the two) */
    /* Or batches of up to dispatch.batch_max messages (rl_consumer_batch_fn): exactly one of
     * these four handlers. */
    rl_consumer_batch_fn batch_handler;             /* blocking, on the lane workers */
    rl_consumer_async_batch_fn async_batch_handler; /* asynchronous, on the loop */
    void *data;                                     /* the caller's, see rl_consumer_get_data */
    /* The dispatcher: lanes, lane_capacity, max_jobs, max_attempts, backoff, workers (blocking
     * handlers: a shared pool of that many threads instead of one per lane), job_timeout_ms
     * (asynchronous handlers: an attempt not completed in time fails with RL_ETIMEDOUT). Lanes
     * NULL with lane_count N make N lanes named "lane-0".."lane-<N-1>" (the dispatcher's
     * RL_DISPATCH_LANE_PREFIX rule); with an asynchronous handler, lanes NULL and lane_count 0
     * make RL_CONSUMER_ASYNC_LANES lanes named the same way, on a RL_CONSUMER_ASYNC_PROFILE
     * ring unless dispatch.ring is given (then RL_CONSUMER_ASYNC_LANES_RING lanes on that ring).
     * A blocking handler needs a count
     * or names. Its handler, async_handler, batch_handler, async_batch_handler, on_done,
     * on_capacity and data belong to the consumer and must stay NULL; batch_max is yours. */
    rl_dispatch_options dispatch;
    /* The dead-letter topic: NULL = "<source topic>.dlq"; "" = none (dead letters are only
     * reported to on_dead_letter and count as done). */
    const char *dlq_topic;
    /* The dead-letter producer's configuration (taken over like conf, so not conf itself), used as
     * it is; NULL = a copy of conf without the properties the running librdkafka marks
     * consumer-only (so the producer logs no CONFWARN about them), with enable.idempotence=true.
     * Producer properties set on conf come along, but the consumer warns that it ignores them:
     * settings for the dead-letter producer alone belong in a dlq_conf. */
    rd_kafka_conf_t *dlq_conf;
    int null_key;                /* enum rl_consumer_null_key (PARTITION) */
    uint32_t max_key_len;        /* longer keys are dead-lettered (4096) */
    uint32_t window;             /* offsets dispatched and unfinished per partition (65536) */
    uint32_t pending_max;        /* refused messages kept per partition before it pauses (16384) */
    uint32_t poll_batch;         /* messages per loop turn (500) */
    uint32_t revoke_timeout_ms;  /* how long a revoke waits for in-flight messages, and then
                                    for its commit (30000) */
    uint32_t commit_interval_ms; /* the least time between two commits of the watermarks (and
                                    offset maps) (1000); with the offset map, an assignment's
                                    first completed work is committed at once */
    uint32_t dlq_retry_ms;       /* delay before a failed dead-letter produce is retried (1000) */
    /* The offset map (docs/consumer.md): each commit carries, in its metadata, which offsets
     * above the committed one have completed, and a partition's next owner skips them. The
     * longest map, in bytes (4096, Kafka's offset.metadata.max.bytes; 32..32767). Exact: a
     * partition takes no offset that could make its map longer, which bounds its offsets from
     * the oldest unfinished one to the newest taken (24,416 at 4096 for offsets below 2^28;
     * docs/operations.md has the figure for other limits). 0 turns the map off: commits carry
     * no metadata (librdkafka's auto-committer commits the watermarks) and assignments read
     * none. */
    uint32_t offset_map_max_bytes;
    /* How long a close before the consumer's first assignment waits for it (5000), with
     * cooperative-sticky on librdkafka before 2.3.0 only (see rl_consumer_close); then the
     * close goes on. Not 0. */
    uint32_t first_assignment_timeout_ms;
    /* The rate limit: messages handed to the handler per second, counted as they go to the
     * lanes (a retry takes nothing; a message dead-lettered for its key, or skipped by the
     * offset map, takes nothing), by a token bucket of max_burst tokens that starts full and
     * gains max_rate a second. Enforced at intake: a message that finds the bucket empty is
     * kept, in order, with what its partition polls behind it, and the partition is paused once
     * pending_max are kept (the pause of the backpressure above: one mechanism, one state) and
     * resumed once half of them are gone; a timer set to when the next token is due hands the
     * kept messages over, one partition after another in turn. Nothing sleeps and no handler
     * blocks. Order, commits and rebalances are unchanged (kept messages are never committed
     * past; a revoke drops them for the next owner). 0 = no limit (0); else 0.001..1e9, with
     * max_burst 1..4294967295 (at least max_rate x 0.002 to reach the rate: the loop's timers
     * have a resolution of 1 ms). Over any T seconds at most max_burst + max_rate x T messages
     * go to the lanes. dispatch.max_rate must stay 0: the consumer's limit is this one. */
    double max_rate;
    uint32_t max_burst; /* the most tokens the bucket holds: messages handed over at once (0) */
    /* The growth fence (docs/partition_growth.md, "The consumer's fence"; off by default for
     * now): after a topic grew from P to P' partitions with `ringlane grow`, a message of a
     * new partition q whose key the producers' ring moved there waits until the group has
     * consumed the key's old partition p (the ring over P) up to the growth point the record
     * names, so a moved key's new messages run after its old ones. Only moved keys wait, each
     * behind the messages of its own old partition; old partitions never wait. The records
     * (topic __ringlane_growth) are read on a thread with a second librdkafka handle of its own
     * (conf's brokers and security, no group, read_committed) at the start, at each assignment
     * and every growth_reread_ms; until a first read succeeded, and after each assignment until
     * the read it asks for succeeded, every message of the assigned partitions is kept (fail
     * closed). A record the consumer cannot use (refused, or another profile, vnodes or ring)
     * is reported through on_error and the partitions of its growth are kept whole. A held
     * message is unfinished (no commit passes it); a revoke drops it for the next owner. A new
     * partition without a committed offset starts at its beginning, whatever auto.offset.reset
     * says. Counted in the growth_* statistics. */
    int growth_fence;                /* 1: on (0) */
    uint32_t growth_reread_ms;       /* how often the records are read again (15000; 100..30000: at
                                        most the shortest --announce-wait of `ringlane grow`, 30 s) */
    uint32_t growth_read_timeout_ms; /* a read that has not reached the end by then failed
                                        (10000; 1000..600000) */
    /* The bound on a wait (after the seal only): when the group's committed offset of an old
     * partition p has not moved for growth_stall_ms while moved keys' messages wait on it (its
     * consumer stopped, or stuck on one message), those messages go on, and later ones of p's
     * moved keys with them: their order across the growth is no longer kept. Counted in
     * growth_released_by_stall, reported through on_error once per old partition. A group that
     * is merely behind commits as it goes: it is not released. 600000 (10 minutes); 0: never
     * (they wait for p however long); else 1000..86400000. While the group's committed offsets
     * cannot be read, the clock starts again. */
    uint32_t growth_stall_ms;
    /* The producers' ring: their partitioner's ringlane.profile (NULL: the partitioner's
     * default, RL_CONSUMER_GROWTH_PROFILE) and ringlane.vnodes (0: the profile's default), as
     * `ringlane grow --profile --vnodes` recorded them. A profile whose rl_ring_add moves keys
     * only to the added member (rl_profile_info.local_add) is required. */
    const char *growth_profile;
    uint32_t growth_vnodes;
    rl_consumer_rebalance_cb on_rebalance;     /* NULL: none */
    rl_consumer_dead_letter_cb on_dead_letter; /* NULL: none */
    rl_consumer_error_cb on_error;             /* NULL: none */
    /* Statistics on a timer, as librdkafka's statistics.interval.ms and stats_cb: every
     * stats_interval_ms (0 = off; 1..RL_DISPATCH_STATS_INTERVAL_MAX_MS) on_stats gets the JSON
     * on the loop thread, until the close has revoked the partitions and closes the dispatcher (the
     * timer does not keep the loop alive). By
     * default the compact text: the consumer's counters, every assigned partition, and under
     * "dispatcher" the dispatcher's compact text (its totals, removed lanes, and the
     * stats_lanes busiest lanes); at most 1.1 KB + (340 bytes + the topic's length) per assigned
     * partition + the dispatcher's (under 6.4 KB with 16 lanes named "lane-<n>"), whatever the lane
     * count. With stats_full the text of rl_consumer_stats_json. A tick allocates nothing once its
     * buffers (kept and reused) have grown. dispatch.stats_* and dispatch.on_stats belong to the
     * consumer and stay as rl_consumer_options_init leaves them. */
    int64_t stats_interval_ms;     /* (0) */
    rl_consumer_stats_cb on_stats; /* required when stats_interval_ms is set */
    uint32_t stats_lanes;          /* lanes the compact text lists, 0..RL_DISPATCH_STATS_LANES_MAX
                                      (RL_DISPATCH_STATS_LANES) */
    int stats_full;                /* 1: rl_consumer_stats_json's text (0) */
} rl_consumer_options;

/* Fills opts with the defaults in parentheses above, rl_dispatch_options_init for dispatch but
 * lane_capacity 8192 (a paused partition costs a refetch: deeper lanes pause less), and
 * everything else NULL / 0. */
RL_EXTERN void rl_consumer_options_init(rl_consumer_options *opts);

/* Makes a consumer on `loop` (call on the loop thread): its dispatcher, its librdkafka consumer
 * subscribed to the topics, and the dead-letter producer. Errors: RL_EINVAL (NULL argument, no
 * conf or topics; dlq_conf the same as conf; not exactly one of handler, async_handler,
 * batch_handler and async_batch_handler; no lanes with a blocking handler; a dispatch callback set;
 * dispatch.workers with async_handler, dispatch.job_timeout_ms with handler; max_rate NaN,
 * infinite, negative or outside 0.001..1e9, max_burst 0 with max_rate set or set without it,
 * dispatch.max_rate or dispatch.max_burst set; a zero limit: max_key_len, window, pending_max,
 * poll_batch, revoke_timeout_ms, commit_interval_ms, dlq_retry_ms, first_assignment_timeout_ms;
 * no group.id; stats_interval_ms negative, over RL_DISPATCH_STATS_INTERVAL_MAX_MS or set without
 * on_stats; stats_lanes over RL_DISPATCH_STATS_LANES_MAX; dispatch.on_stats or
 * dispatch.stats_interval_ms set), RL_EKAFKA (librdkafka refused the configuration, or the
 * subscription: the detail quotes the topics), the dispatcher's errors, RL_ENOMEM, RL_ELOOP. On a
 * refusal *out is NULL, both configurations are freed, and rl_last_error_detail() says why: the
 * option as written in C, its value, the reason ("conf: no group.id (the consumer commits a group's
 * offsets)"); the dispatcher's refusals come under "dispatch." ("dispatch.lane_capacity 0: ..."),
 * librdkafka's with its own message. A refusal that comes after the dispatcher was made (RL_EKAFKA,
 * RL_ELOOP) leaves it closing on the loop: run the loop (uv_run) before uv_loop_close. */
RL_EXTERN int rl_consumer_new(struct uv_loop_s *loop, const rl_consumer_options *opts,
                              rl_consumer_t **out);

/* Ends the asynchronous attempt named by ticket (as async_handler got it): status 0 is
 * success, anything else a failure (retried, then dead-lettered). Any thread, inside
 * async_handler too, until close_cb has begun. RL_ESTALE when no attempt waits for this
 * ticket: completed already, its job_timeout_ms passed, or its partition was revoked (after
 * revoke_timeout_ms) or lost; nothing changes then and the result counts for nothing.
 * RL_EINVAL (NULL c, ticket 0), RL_ESTATE (a consumer with a blocking handler). */
RL_EXTERN int rl_consumer_complete(rl_consumer_t *c, uint64_t ticket, int status);

/* Ends the asynchronous batch named by ticket (as async_batch_handler got it) with a status per
 * message: status[i] for msgs[i], n the batch's length. As rl_consumer_complete otherwise;
 * RL_EINVAL also for NULL status or n not the batch's length (nothing changes then). */
RL_EXTERN int rl_consumer_complete_batch(rl_consumer_t *c, uint64_t ticket, const int *status,
                                         size_t n);

/* The options' data pointer (NULL for NULL). Any thread. */
RL_EXTERN void *rl_consumer_get_data(const rl_consumer_t *c);

/* The consumer's dispatcher, for lane changes and its statistics (NULL for NULL). Its
 * loop-thread rules apply. Do not close it: rl_consumer_close does. Every lane may be removed
 * (the last one once idle): the consumer then keeps the messages it polls, in order, as for
 * full lanes (a partition pauses at pending_max kept), hands none to the handler and commits
 * nothing past them; when a lane is added they flow again, in order. */
RL_EXTERN rl_dispatcher_t *rl_consumer_dispatcher(rl_consumer_t *c);

/* The librdkafka consumer handle, for metadata and queries (NULL for NULL). Do not poll it,
 * assign, commit or close it: the consumer does. */
RL_EXTERN rd_kafka_t *rl_consumer_kafka(rl_consumer_t *c);

/* Starts closing (loop thread): stops taking messages, takes the queued ones back from the
 * lanes (the next owner reads them again), waits without blocking the loop for the messages in
 * flight and their dead letters (up to revoke_timeout_ms), then, with the offset map, commits
 * every partition's watermark and map while still a member of the group, right after the next
 * heartbeat answer (up to heartbeat.interval.ms: a commit that crosses librdkafka's own rejoin
 * would lose the assignment, and librdkafka rejoins only when a heartbeat says so); that commit is
 * retried up to revoke_timeout_ms after a coordinator error (NOT_COORDINATOR,
 * COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, REQUEST_TIMED_OUT) and, with
 * cooperative-sticky, after REBALANCE_IN_PROGRESS (consumers closing together: the first one's
 * leaving makes the group rebalance) once librdkafka has joined the next generation, or 1 s
 * passed without a join; it blocks the loop meanwhile, within the bound below. Then it revokes
 * every partition as a rebalance does (waits for in-flight messages, commits the watermarks),
 * leaves the group, then closes
 * the dispatcher (handler calls still running finish) and flushes the dead-letter producer
 * (up to revoke_timeout_ms). Leaving the group does not block the loop; the revoke's waits,
 * the final flush and librdkafka's destroy do, within their bounds: with a blocking handler a
 * revoke (the close's too, and one of a cooperative rebalance under way when close is called)
 * blocks the loop up to revoke_timeout_ms for the messages in flight and dead letters, then up
 * to revoke_timeout_ms again for the answer to its commit, even with nothing in flight (a group
 * in the middle of a rebalance may not answer sooner); with an asynchronous handler it waits
 * for the messages without blocking, and only the dead letters and the commit block, each up to
 * revoke_timeout_ms. So a close blocks the loop for at most 2 x revoke_timeout_ms per revoke,
 * plus the final flush (revoke_timeout_ms) and rd_kafka_destroy. cb (may be NULL) runs when
 * everything has ended; the consumer is freed when it returns. On librdkafka before 2.3.0
 * with cooperative-sticky, a close before the consumer's first assignment waits for it (up to
 * first_assignment_timeout_ms, 5 s by default) before leaving: destroying it in between aborts
 * there (librdkafka issue 4312). If none comes although the group answered the join, the
 * librdkafka handle is left undestroyed and on_error says so; if the group never answered
 * (a cluster out of reach), the close just goes on. An assignment librdkafka had already
 * queued when the close asked it to leave (it takes it as an unassign) is reported and, under
 * the eager protocol, released at once; none of its messages is handled or committed. On
 * librdkafka before 2.4.0 a cooperative-sticky consumer whose such assignment is empty (the
 * first one of a consumer joining a busy group) never finishes librdkafka's close (librdkafka
 * issue 4527): the close ends without it, the handle is left undestroyed, on_error says so,
 * and the group drops the member when session.timeout.ms has passed. Errors: RL_EINVAL,
 * RL_ESTATE (not the loop thread), RL_ECLOSED (already closing). */
RL_EXTERN int rl_consumer_close(rl_consumer_t *c, rl_consumer_close_cb cb);

/* --- statistics (loop thread) --- */

/* Room for a key as the statistics show it (rl_consumer_partition_stats.holder_key): 64
 * characters, "..." and the NUL. */
#define RL_CONSUMER_KEY_TEXT_MAX 68

typedef struct rl_consumer_partition_stats {
    const char *topic; /* valid until the consumer is closed */
    int32_t partition;
    uint32_t epoch;     /* assignments and revokes so far */
    int paused;         /* paused by backpressure */
    int64_t committed;  /* the last commit the group acknowledged, -1 before the first */
    int64_t watermark;  /* everything below it has completed: the next commit, -1 if none.
                           Right after an assignment whose offset map let it skip messages, it
                           can trail the committed offset until the first unfinished offset
                           the map named has completed (the commits are right meanwhile) */
    int64_t high;       /* the partition's high watermark last seen, -1 if unknown */
    int64_t lag;        /* high - watermark (or the next offset to fetch), -1 if unknown */
    uint64_t in_flight; /* offsets dispatched and not yet below the watermark */
    uint64_t pending;   /* messages kept while the partition is paused */
    uint64_t dead_letters_in_flight; /* dead letters waiting for their delivery report */
    uint64_t offset_map_bytes;       /* the length of the offset map the last acknowledged commit
                                        carried, 0 for none */
    /* The watermark's holder: the message at the oldest offset not finished, which every
     * commit waits for (a poison key parked for its retries, an asynchronous job never
     * completed). holder_offset -1: none (nothing in flight). */
    int64_t holder_offset;
    char holder_key[RL_CONSUMER_KEY_TEXT_MAX]; /* its key as the statistics show keys: the first
                                                  64 bytes when printable ASCII, else the
                                                  first 32 in hex; a cut key ends in "..." */
    int holder_key_hex;                        /* 1: holder_key is hex */
    uint64_t holder_key_len;                   /* the whole key's length (0: no key) */
    int64_t holder_age_ms;    /* since the consumer took the message (-1: no holder) */
    uint32_t holder_failures; /* its handler calls that failed so far (asynchronous handlers: the
                                 failures before the attempt in flight) */
    int holder_parked;        /* 1: it failed and waits for its retry (blocking handlers; an
                                 asynchronous one shows 0) */
} rl_consumer_partition_stats;

typedef struct rl_consumer_stats {
    size_t partitions;      /* assigned now */
    uint64_t consumed;      /* messages taken from librdkafka (not counting refetches) */
    uint64_t dispatched;    /* submitted to the dispatcher */
    uint64_t done;          /* handled successfully (in the current assignment) */
    uint64_t dead_lettered; /* delivered to the dead-letter topic (or dropped, with none) */
    uint64_t dlq_failures;  /* dead-letter produces that failed and were retried */
    uint64_t null_keys;     /* messages without a key */
    uint64_t bad_keys;      /* keys too long or not hashable: dead-lettered */
    uint64_t refetched;     /* messages librdkafka delivered again after a resume, dropped */
    uint64_t stale;         /* ends of a revoked or lost assignment (or unstarted), ignored */
    uint64_t returned;      /* queued messages handed back at a revoke (read again later) */
    uint64_t pauses, resumes;
    uint64_t assigned, revoked, lost; /* partitions, per rebalance event */
    uint64_t revoke_timeouts;         /* revokes that stopped waiting for in-flight messages */
    uint64_t abandoned; /* asynchronous messages in flight such a revoke (or a loss) let go:
                           their tickets answer RL_ESTALE */
    uint64_t commits, commit_failures;
    uint64_t dlq_producer_restarts; /* dead-letter producers replaced after a fatal error */
    uint64_t skipped; /* messages not handed to the handler: the committed offset map, read at
                         their partition's assignment, says they had completed */
    uint64_t offset_map_rejected; /* assignments whose committed metadata was no usable map
                                     (another tool's, damaged, of another version, not about
                                     the committed offset, unreadable): handled again */
    uint64_t fetch_restarts;      /* librdkafka's queue reached queued.min.messages, so it stopped
                                     fetching, and the consumer restarted it once the queue was
                                     empty (it would wait for its broker thread's next pass, up to
                                     a second) */
    uint64_t rate_limited; /* times a message found the rate limit's bucket empty and was kept
                              (a kept message counts again at each later try that finds none) */
    uint64_t rate_pauses;  /* of pauses, those of a partition whose backlog waited for the rate
                              limit */
    /* The growth fence (growth_fence; all 0 when off). */
    uint64_t growth_held;     /* messages it held, each once (a moved key's, or every message of
                                 a partition held whole: records not read yet, or unusable) */
    uint64_t growth_released; /* of the moved keys' held messages, those that went on */
    uint64_t
        growth_unrouted;         /* messages of a grown partition the producers' ring did not put
                                    there (NULL or empty keys, the partitioner's fallbacks): not held */
    uint64_t growth_records;     /* growth records in the last complete read (every topic's) */
    uint64_t growth_read_errors; /* reads of the records that failed (each run of failures
                                    reported once, through on_error) */
    uint64_t growth_waiting;     /* moved keys' messages held now */
    uint64_t growth_hold_ms;     /* the time the released ones were held as moved keys' (from
                                    their taking to their release; a wait of their partition
                                    held whole before that is not counted), summed */
    uint64_t growth_released_by_stall; /* moved keys' messages that went on because their old
                                          partition's commits stalled (growth_stall_ms): held
                                          ones (counted in growth_released too) and later ones */
    uint64_t growth_late; /* messages of an old partition at or above its growth point whose key
                             the grown ring puts elsewhere: a producer routed over the old count
                             after the seal (handled as any; reported once per assignment) */
} rl_consumer_stats;

/* Fills *out and up to cap partition entries (assigned partitions); *n (may be NULL) gets how
 * many there are. Loop thread only (RL_ESTATE elsewhere). */
RL_EXTERN int rl_consumer_stats_get(rl_consumer_t *c, rl_consumer_stats *out,
                                    rl_consumer_partition_stats *parts, size_t cap, size_t *n);

/* The same as one JSON object, with the dispatcher's statistics under "dispatcher"; like
 * snprintf: *len (may be NULL) gets the length the whole text needs, RL_ERANGE when cut. The
 * dispatcher's "lane" array holds every lane when there are at most RL_CONSUMER_STATS_LANES_MAX
 * ("lane_list": "all"), else only the lanes holding a message, at most that many ("lane_list":
 * "busy", "lanes_busy": how many hold one), so the text stays small at 65,536 lanes. */
RL_EXTERN int rl_consumer_stats_json(rl_consumer_t *c, char *buf, size_t cap, size_t *len);

/* The statistics in the Prometheus text exposition format (version 0.0.4): the consumer's
 * counters and per assigned partition (labels topic, partition) as ringlane_consumer_*
 * families, then the dispatcher's (rl_dispatch_stats_prometheus with max_lanes: the lanes
 * listed are every lane up to max_lanes, else the max_lanes busiest). docs/operations.md lists
 * every metric. Like snprintf: *len (may be NULL) gets the length the whole text needs,
 * RL_ERANGE when cut (the text is still terminated). RL_EINVAL (NULL c, NULL buf with a cap),
 * RL_ESTATE off the loop thread, RL_ENOMEM. The size: about 4 KB (3.9 KB measured) + about
 * 1 KB per assigned partition + the dispatcher's. */
RL_EXTERN int rl_consumer_stats_prometheus(rl_consumer_t *c, size_t max_lanes, char *buf,
                                           size_t cap, size_t *len);

#ifdef __cplusplus
}
#endif
#endif
