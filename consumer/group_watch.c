/* SPDX-License-Identifier: BSD-2-Clause */
/* The group's join requests in flight, seen through librdkafka's interceptors.
 *
 * A commit sent while this consumer's JoinGroup waits at the group coordinator queues behind it
 * on the same connection (a broker answers a connection's requests in order), so it is handled
 * only once the join has completed, against the group's next generation: ILLEGAL_GENERATION.
 * librdkafka before 2.10 then declares the whole assignment lost (its issue 4059), and
 * everything since the last commit is handled again. Its auto-committer avoids this by
 * committing only in its steady join state, which the application cannot see; a cooperative
 * consumer rejoins while it keeps consuming, so the consumer's own periodic commits must wait
 * too. librdkafka calls on_request_sent and on_response_received on its broker threads for
 * every request: the JoinGroup and SyncGroup requests of this consumer in flight are kept
 * here, and periodic commits wait while there is one. Heartbeat answers are counted: a close's
 * commit goes out right after one (rebalance.c, wait_heartbeat). LeaveGroup requests are
 * counted too: once a closing consumer's LeaveGroup has gone out, librdkafka has given up the
 * assignment by itself and its group may end at any moment (rebalance.c, left_group). */
#include "consumer_internal.h"

#include <stddef.h>
#include <stdlib.h>

#define API_JOIN_GROUP 11
#define API_SYNC_GROUP 14
#define API_HEARTBEAT 12
#define API_LEAVE_GROUP 13
#define WATCH_NAME "ringlane.group_watch"

static rd_kafka_resp_err_t on_sent(rd_kafka_t *rk, int sockfd, const char *brokername,
                                   int32_t brokerid, int16_t ApiKey, int16_t ApiVersion,
                                   int32_t CorrId, size_t size, void *ic_opaque)
{
    (void)rk, (void)sockfd, (void)brokername, (void)ApiVersion, (void)CorrId, (void)size;
    rl__group_watch *w = ic_opaque;
    if (ApiKey == API_LEAVE_GROUP) {
        uv_mutex_lock(&w->mu);
        w->leaves++;
        uv_mutex_unlock(&w->mu);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    if (ApiKey != API_JOIN_GROUP && ApiKey != API_SYNC_GROUP)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    uv_mutex_lock(&w->mu);
    if (w->n < RL__GROUP_WATCH_MAX) /* one join or sync at a time: never full */
        w->v[w->n++] = (rl__group_request){brokerid, ApiKey};
    uv_mutex_unlock(&w->mu);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static rd_kafka_resp_err_t on_received(rd_kafka_t *rk, int sockfd, const char *brokername,
                                       int32_t brokerid, int16_t ApiKey, int16_t ApiVersion,
                                       int32_t CorrId, size_t size, int64_t rtt,
                                       rd_kafka_resp_err_t err, void *ic_opaque)
{
    (void)rk, (void)sockfd, (void)brokername, (void)ApiVersion, (void)size, (void)rtt;
    (void)err, (void)CorrId;
    /* The answer to a join or sync (or its failure): its request is let go. librdkafka 2.0
     * passes no correlation id here (0) and calls this twice per answer (from the broker
     * thread, then before the main thread handles it), so requests are told apart by broker
     * and ApiKey, one removed per call (a second call finds none: the next join is sent only
     * after the answer is handled). A response for a request it no longer knows (ApiKey -1)
     * lets go of every request of that broker; librdkafka joins again if it still must. */
    bool unknown = ApiKey < 0;
    rl__group_watch *w = ic_opaque;
    if (ApiKey == API_HEARTBEAT) {
        uv_mutex_lock(&w->mu);
        w->beats++;
        uv_mutex_unlock(&w->mu);
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    if (!unknown && ApiKey != API_JOIN_GROUP && ApiKey != API_SYNC_GROUP)
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    uv_mutex_lock(&w->mu);
    for (int i = 0; i < w->n;) {
        if (w->v[i].broker == brokerid && (unknown || w->v[i].api == ApiKey)) {
            w->v[i] = w->v[--w->n];
            if (ApiKey == API_JOIN_GROUP)
                w->joins++;
            if (!unknown)
                break;
        } else {
            i++;
        }
    }
    uv_mutex_unlock(&w->mu);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static rd_kafka_resp_err_t on_new(rd_kafka_t *rk, const rd_kafka_conf_t *conf, void *ic_opaque,
                                  char *errstr, size_t errstr_size)
{
    (void)conf, (void)errstr, (void)errstr_size;
    rd_kafka_resp_err_t err =
        rd_kafka_interceptor_add_on_request_sent(rk, WATCH_NAME, on_sent, ic_opaque);
    if (!err)
        err = rd_kafka_interceptor_add_on_response_received(rk, WATCH_NAME, on_received, ic_opaque);
    return err;
}

int rl__group_watch_install(rl_consumer_t *c, rd_kafka_conf_t *conf)
{
    rl__group_watch *w = calloc(1, sizeof *w);
    if (!w)
        return RL_ENOMEM;
    if (uv_mutex_init(&w->mu) != 0) {
        free(w);
        return RL_ENOMEM;
    }
    c->watch = w;
    /* The opaque is the watch, not the consumer: it outlives the consumer when the librdkafka
     * handle is left undestroyed (see may_leave in consumer.c). */
    rd_kafka_resp_err_t err = rd_kafka_conf_interceptor_add_on_new(conf, WATCH_NAME, on_new, w);
    return err ? RL_EKAFKA : 0;
}

void rl__group_watch_free(rl_consumer_t *c)
{
    if (!c->watch)
        return;
    uv_mutex_destroy(&c->watch->mu);
    free(c->watch);
    c->watch = NULL;
}

bool rl__group_joining(rl_consumer_t *c)
{
    rl__group_watch *w = c->watch;
    if (!w)
        return false;
    uv_mutex_lock(&w->mu);
    bool busy = w->n > 0;
    uv_mutex_unlock(&w->mu);
    return busy;
}

/* One of the watch's counters, read under its lock (0 without a watch). */
static uint64_t read_count(rl_consumer_t *c, size_t offset)
{
    rl__group_watch *w = c->watch;
    if (!w)
        return 0;
    uv_mutex_lock(&w->mu);
    uint64_t n = *(const uint64_t *)((const char *)w + offset);
    uv_mutex_unlock(&w->mu);
    return n;
}

uint64_t rl__group_joins(rl_consumer_t *c)
{
    return read_count(c, offsetof(rl__group_watch, joins));
}

uint64_t rl__group_beats(rl_consumer_t *c)
{
    return read_count(c, offsetof(rl__group_watch, beats));
}

uint64_t rl__group_leaves(rl_consumer_t *c)
{
    return read_count(c, offsetof(rl__group_watch, leaves));
}
