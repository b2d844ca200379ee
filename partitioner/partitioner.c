/* SPDX-License-Identifier: BSD-2-Clause */
/* The ring partitioner: the librdkafka callback and its lifecycle. */
#include "partitioner_internal.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"
#include "ringlane/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The refusal of opts by rl__kafka_options_explain, naming the field as written in C: the
 * check's code says which field it is about. */
static int options_refusal(int rc, const rl_kafka_partitioner_options *o, const char *why)
{
    char names[256] = "";
    size_t used = 0;
    switch (rc) {
    case RL_EPROFILE:
        for (size_t i = 0; i < rl_profile_count() && used < sizeof names; i++) {
            int n = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                             rl_profile_at(i)->name);
            used += n > 0 ? (size_t)n : 0;
        }
        return rl_error_detail_set(rc, "profile \"%.64s\": unknown profile (one of: %s)",
                                   o->profile, names);
    case RL_EVNODES:
        if (o->vnodes != RL_VNODES_PROFILE && (o->vnodes < 1 || o->vnodes > RL_KAFKA_VNODES_MAX))
            return rl_error_detail_set(rc, "vnodes %u: outside 1..%u (and the profile's range)",
                                       o->vnodes, RL_KAFKA_VNODES_MAX);
        return rl_error_detail_set(rc, "vnodes %u: %s", o->vnodes, why);
    case RL_ENOTSUP:
        return rl_error_detail_set(rc, "skip_unavailable %d: %s", o->skip_unavailable, why);
    case RL_EINVAL:
        return rl_error_detail_set(rc,
                                   "null_key %d: not a policy (RL_KAFKA_NULL_KEY_RANDOM %d or "
                                   "RL_KAFKA_NULL_KEY_FIXED %d)",
                                   (int)o->null_key, RL_KAFKA_NULL_KEY_RANDOM,
                                   RL_KAFKA_NULL_KEY_FIXED);
    case RL_ERANGE:
        if (o->partitions_used < 0)
            return rl_error_detail_set(rc,
                                       "partitions_used %ld: negative (0: every partition, else "
                                       "1..%d)",
                                       (long)o->partitions_used, RL_KAFKA_PARTITION_MAX);
        return rl_error_detail_set(rc,
                                   "null_key_partition %ld: outside 0..%d with "
                                   "RL_KAFKA_NULL_KEY_FIXED",
                                   (long)o->null_key_partition, RL_KAFKA_PARTITION_MAX);
    default:
        return rl_error_detail_set(rc, "opts: %s", why);
    }
}

int rl_kafka_partitioner_new(const rl_kafka_partitioner_options *opts, rl_kafka_partitioner_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the partitioner");
    *out = NULL;
    rl_kafka_partitioner_options o, given;
    if (opts)
        given = *opts;
    else
        rl_kafka_partitioner_options_init(&given);
    char why[256];
    int rc = rl__kafka_options_explain(&given, &o, why, sizeof why);
    if (rc)
        return options_refusal(rc, &given, why);
    rl_kafka_partitioner_t *p = calloc(1, sizeof *p);
    if (!p)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the partitioner");
    p->opts = o;
    if (rl__ring_cache_init(&p->rings, o.profile, o.vnodes) != 0) {
        free(p);
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the partitioner's ring cache");
    }
    /* Random NULL-key partitions need no reproducibility, only a different stream per
     * partitioner: mix the clock and the address. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_init(&p->rand_state, rl_mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                                         (uint64_t)(uintptr_t)p));
    atomic_init(&p->null_keys, 0);
    atomic_init(&p->skipped, 0);
    atomic_init(&p->fallbacks, 0);
    atomic_init(&p->watched, NULL);
    if (pthread_mutex_init(&p->watch_lock, NULL) != 0) {
        rl__ring_cache_destroy(&p->rings);
        free(p);
        return rl_error_detail_set(RL_ENOMEM, "out of memory: the partitioner's mutex");
    }
    *out = p;
    return 0;
}

void rl_kafka_partitioner_destroy(rl_kafka_partitioner_t *p)
{
    if (!p)
        return;
    rl__ring_cache_destroy(&p->rings);
    for (rl__topic_watch *w = atomic_load_explicit(&p->watched, memory_order_acquire); w;) {
        rl__topic_watch *next = w->next;
        free(w);
        w = next;
    }
    pthread_mutex_destroy(&p->watch_lock);
    free(p);
}

int rl__kafka_partitioner_reconfigure(rl_kafka_partitioner_t *p,
                                      const rl_kafka_partitioner_options *opts)
{
    rl_kafka_partitioner_options o;
    int rc = rl__kafka_options_check(opts, &o);
    if (rc)
        return rc;
    if (atomic_load_explicit(&p->rings.head, memory_order_acquire))
        return RL_ESTATE;
    p->opts = o;
    p->rings.profile = o.profile;
    p->rings.vnodes = o.vnodes;
    return 0;
}

void rl__kafka_partitioner_refuse(rl_kafka_partitioner_t *p)
{
    p->refused = 1;
}

int rl_kafka_partitioner_install(rl_kafka_partitioner_t *p, rd_kafka_topic_conf_t *topic_conf)
{
    if (!p || !topic_conf)
        return RL_EINVAL;
    rd_kafka_topic_conf_set_partitioner_cb(topic_conf, rl_kafka_partitioner_cb);
    rd_kafka_topic_conf_set_opaque(topic_conf, p);
    return 0;
}

static int available(const rd_kafka_topic_t *rkt, int32_t partition)
{
    return !rkt || rd_kafka_topic_partition_available(rkt, partition);
}

/* A uniformly random partition; with a topic, one of the available partitions when any is. */
static int32_t random_partition(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                                int32_t partition_cnt)
{
    uint64_t r = rl_mix64(atomic_fetch_add_explicit(&p->rand_state, UINT64_C(0x9E3779B97F4A7C15),
                                                    memory_order_relaxed));
    int32_t first = (int32_t)((r & 0xFFFFFFFFu) % (uint32_t)partition_cnt);
    if (available(rkt, first))
        return first;
    /* Rare: count the available partitions, then take the k-th, so that the choice stays
     * uniform over them. Availability may change meanwhile; then keep the first pick. */
    int32_t n = 0;
    for (int32_t i = 0; i < partition_cnt; i++)
        n += available(rkt, i) != 0;
    if (n == 0)
        return first;
    int32_t k = (int32_t)((r >> 32) % (uint32_t)n);
    for (int32_t i = 0; i < partition_cnt; i++)
        if (available(rkt, i) && k-- == 0)
            return i;
    return first;
}

static int32_t null_key_partition(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                                  int32_t partition_cnt)
{
    atomic_fetch_add_explicit(&p->null_keys, 1, memory_order_relaxed);
    if (p->opts.null_key == RL_KAFKA_NULL_KEY_FIXED)
        return p->opts.null_key_partition % partition_cnt;
    return random_partition(p, rkt, partition_cnt);
}

/* The first available partition clockwise from the key; the owner when none is. The walk
 * reads the ring's preference list in growing chunks, so a healthy cluster pays nothing and a
 * degraded one pays for as many partitions as it has to look at. */
static int32_t next_available(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                              const rl_ring_t *ring, const void *key, size_t keylen, int32_t owner,
                              int32_t partition_cnt)
{
    static const size_t chunks[] = {4, 16, 64, 256};
    uint32_t list[256];
    size_t checked = 1; /* list[0] is the owner */
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        size_t want = chunks[c] < (size_t)partition_cnt ? chunks[c] : (size_t)partition_cnt;
        size_t got = 0;
        if (rl_ring_replicas(ring, key, keylen, list, want, &got) != 0)
            break;
        for (size_t i = checked; i < got; i++) {
            if (available(rkt, (int32_t)list[i])) {
                atomic_fetch_add_explicit(&p->skipped, 1, memory_order_relaxed);
                return (int32_t)list[i];
            }
        }
        checked = got;
        if (got < want || got >= (size_t)partition_cnt)
            break;
    }
    return owner;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The watch of (rkt, partition_cnt), made on first use; NULL past RL__TOPIC_WATCH_MAX or out
 * of memory. Finding one is a lock-free walk. */
static rl__topic_watch *watch_of(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt,
                                 int32_t partition_cnt)
{
    for (int pass = 0; pass < 2; pass++) {
        for (rl__topic_watch *w = atomic_load_explicit(&p->watched, memory_order_acquire); w;
             w = w->next)
            if (w->rkt == (const void *)rkt && w->partition_cnt == partition_cnt)
                return w;
        if (pass == 1)
            break;
        pthread_mutex_lock(&p->watch_lock);
        rl__topic_watch *w = NULL;
        int found = 0;
        for (w = atomic_load_explicit(&p->watched, memory_order_relaxed); w; w = w->next)
            if (w->rkt == (const void *)rkt && w->partition_cnt == partition_cnt)
                found = 1;
        if (!found && p->watch_count < RL__TOPIC_WATCH_MAX &&
            (w = calloc(1, sizeof *w + (size_t)partition_cnt * sizeof w->down[0]))) {
            w->rkt = rkt;
            w->partition_cnt = partition_cnt;
            for (int32_t i = 0; i < partition_cnt; i++) {
                atomic_init(&w->down[i].since, 0);
                atomic_init(&w->down[i].last, 0);
            }
            w->next = atomic_load_explicit(&p->watched, memory_order_relaxed);
            atomic_store_explicit(&p->watched, w, memory_order_release);
            p->watch_count++;
        }
        pthread_mutex_unlock(&p->watch_lock);
    }
    return NULL;
}

/* Whether the owner has been unavailable for RL_KAFKA_SKIP_GRACE_MS without a break (the
 * first sighting starts the count, and so does one more than RL__SKIP_STALE_MS after the
 * one before); called only while it is unavailable. */
static int down_long_enough(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt, int32_t owner,
                            int32_t partition_cnt)
{
    rl__topic_watch *w = watch_of(p, rkt, partition_cnt);
    if (!w)
        return 1; /* too many topics to watch: skip at once */
    rl__down *d = &w->down[owner];
    int64_t now = now_ns();
    int64_t last = atomic_exchange_explicit(&d->last, now, memory_order_relaxed);
    int64_t since = atomic_load_explicit(&d->since, memory_order_relaxed);
    if (since == 0 || now - last > (int64_t)RL__SKIP_STALE_MS * 1000000) {
        /* Threads racing here all store about `now`: any of them starts the count. */
        atomic_store_explicit(&d->since, now, memory_order_relaxed);
        return 0;
    }
    return now - since >= (int64_t)RL_KAFKA_SKIP_GRACE_MS * 1000000;
}

/* The owner is available: end its unavailability count, if one runs. */
static void seen_available(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt, int32_t owner,
                           int32_t partition_cnt)
{
    for (rl__topic_watch *w = atomic_load_explicit(&p->watched, memory_order_acquire); w;
         w = w->next)
        if (w->rkt == (const void *)rkt && w->partition_cnt == partition_cnt) {
            if (atomic_load_explicit(&w->down[owner].since, memory_order_relaxed) != 0)
                atomic_store_explicit(&w->down[owner].since, 0, memory_order_relaxed);
            return;
        }
}

/* Only when no ring can be had: the messages still flow, each key still to one partition. */
static int32_t fallback_partition(rl_kafka_partitioner_t *p, const void *key, size_t keylen,
                                  int32_t partition_cnt)
{
    atomic_fetch_add_explicit(&p->fallbacks, 1, memory_order_relaxed);
    return (int32_t)(rl_xxh3(key, keylen) % (uint64_t)partition_cnt);
}

/* The callback's body; rkt NULL means "every partition is available". */
static int32_t choose(rl_kafka_partitioner_t *p, const rd_kafka_topic_t *rkt, const void *key,
                      size_t keylen, int32_t partition_cnt)
{
    if (p->refused)
        return partition_cnt; /* out of range: librdkafka refuses the message */
    if (p->opts.partitions_used > 0 && p->opts.partitions_used < partition_cnt)
        partition_cnt = p->opts.partitions_used; /* the ring over the first ones only */
    if (!key || keylen == 0)
        return null_key_partition(p, rkt, partition_cnt);
    /* The first use of a partition count builds its ring (once, whoever comes first). */
    const rl_ring_t *ring = rl__ring_cache_obtain(&p->rings, partition_cnt, NULL);
    if (!ring)
        return fallback_partition(p, key, keylen, partition_cnt);
    uint32_t node;
    int rc = rl_ring_lookup(ring, key, keylen, &node);
    if (rc == RL_EBADKEY)
        return null_key_partition(p, rkt, partition_cnt);
    if (rc != 0 || node >= (uint32_t)partition_cnt)
        return fallback_partition(p, key, keylen, partition_cnt);
    int32_t owner = (int32_t)node;
    if (p->opts.skip_unavailable && rkt) {
        if (available(rkt, owner)) {
            seen_available(p, rkt, owner, partition_cnt);
            return owner;
        }
        if (down_long_enough(p, rkt, owner, partition_cnt))
            return next_available(p, rkt, ring, key, keylen, owner, partition_cnt);
    }
    return owner;
}

int32_t rl_kafka_partitioner_cb(const rd_kafka_topic_t *rkt, const void *key, size_t keylen,
                                int32_t partition_cnt, void *rkt_opaque, void *msg_opaque)
{
    (void)msg_opaque;
    if (partition_cnt < 1)
        return RD_KAFKA_PARTITION_UA;
    rl_kafka_partitioner_t *p = rkt_opaque;
    if (!p) /* not installed through rl_kafka_partitioner_install: still a valid answer */
        return key ? (int32_t)(rl_xxh3(key, keylen) % (uint64_t)partition_cnt) : 0;
    return choose(p, rkt, key, keylen, partition_cnt);
}

int rl_kafka_partitioner_partition(rl_kafka_partitioner_t *p, const void *key, size_t keylen,
                                   int32_t partition_cnt, int32_t *partition)
{
    if (!p || !partition || (!key && keylen))
        return RL_EINVAL;
    if (partition_cnt < 1)
        return RL_ERANGE;
    *partition = choose(p, NULL, key, keylen, partition_cnt);
    return 0;
}

int rl_kafka_partitioner_ring(rl_kafka_partitioner_t *p, int32_t partition_cnt,
                              const rl_ring_t **ring)
{
    if (!p || !ring)
        return RL_EINVAL;
    if (partition_cnt < 1)
        return RL_ERANGE;
    return rl__ring_cache_get(&p->rings, partition_cnt, ring);
}

int rl_kafka_partitioner_get_options(const rl_kafka_partitioner_t *p,
                                     rl_kafka_partitioner_options *out)
{
    if (!p || !out)
        return RL_EINVAL;
    *out = p->opts;
    return 0;
}

int rl_kafka_partitioner_stats_get(const rl_kafka_partitioner_t *p, rl_kafka_partitioner_stats *out)
{
    if (!p || !out)
        return RL_EINVAL;
    rl_kafka_partitioner_t *m = (rl_kafka_partitioner_t *)p; /* atomics are read, not written */
    out->rings = atomic_load_explicit(&m->rings.builds, memory_order_relaxed);
    out->null_keys = atomic_load_explicit(&m->null_keys, memory_order_relaxed);
    out->skipped = atomic_load_explicit(&m->skipped, memory_order_relaxed);
    out->fallbacks = atomic_load_explicit(&m->fallbacks, memory_order_relaxed);
    return 0;
}
