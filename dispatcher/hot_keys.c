/* SPDX-License-Identifier: BSD-2-Clause */
/* The hot-key sketch: the keys holding the most jobs, named by their first bytes. Misra-Gries
 * with departures (dispatcher.h, rl_dispatch_hot_keys, says what the counts promise): a fixed
 * array of entries, an open-addressing index from a key's hash to its entry (linear probing,
 * at most half full, deletion by shifting back), and a stack of free entries. Nothing is
 * allocated after init. One lock, a leaf: taken under a lane's mutex by submissions, alone by
 * the loop thread when jobs end and by the statistics. It is a spin lock: what it guards is a
 * few dozen instructions (a round, the longest, walks the entries and the index, about a
 * microsecond at 64 entries), and a pthread mutex's lock and unlock cost a submission from the
 * loop 60 more instructions than this (callgrind, bench_dispatch one loopfed). A waiter yields
 * its core after 64 looks, so a holder that lost its core is not spun against for a slice. */
#include "dispatch_internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

static void hot_lock(rl__hot_keys *h)
{
    unsigned looks = 0;
    while (atomic_exchange_explicit(&h->locked, true, memory_order_acquire))
        while (atomic_load_explicit(&h->locked, memory_order_relaxed)) {
            if (++looks < 64) {
                rl__cpu_relax();
            } else {
                looks = 0;
                sched_yield();
            }
        }
}

static void hot_unlock(rl__hot_keys *h)
{
    atomic_store_explicit(&h->locked, false, memory_order_release);
}

static uint32_t home(const rl__hot_keys *h, uint64_t hash)
{
    return (uint32_t)((hash * 0x9E3779B97F4A7C15ull) >> 32) & h->mask;
}

/* The index place of hash's entry, or of the empty place where it would go. */
static uint32_t place_of(const rl__hot_keys *h, uint64_t hash)
{
    uint32_t i = home(h, hash);
    while (h->index[i] && h->e[h->index[i] - 1].hash != hash)
        i = (i + 1) & h->mask;
    return i;
}

/* Empties index place i and shifts back the entries after it that would not be found else. */
static void index_remove(rl__hot_keys *h, uint32_t i)
{
    for (uint32_t j = i;;) {
        j = (j + 1) & h->mask;
        if (!h->index[j])
            break;
        uint32_t k = home(h, h->e[h->index[j] - 1].hash);
        /* The entry at j stays when its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            h->index[i] = h->index[j];
            i = j;
        }
    }
    h->index[i] = 0;
}

/* Every entry loses one; those at 0 are freed, and the index is made again. */
static void round_down(rl__hot_keys *h)
{
    memset(h->index, 0, (size_t)(h->mask + 1) * sizeof *h->index);
    for (uint32_t e = 0; e < h->cap; e++) {
        rl__hot_entry *x = &h->e[e];
        if (!x->jobs)
            continue;
        if (--x->jobs == 0)
            h->free[h->nfree++] = e;
        else
            h->index[place_of(h, x->hash)] = e + 1;
    }
    h->rounds++;
}

int rl__hot_keys_new(uint32_t cap, rl__hot_keys **out)
{
    *out = NULL;
    if (!cap)
        return 0;
    uint32_t places = 2;
    while (places < 2 * cap)
        places *= 2;
    rl__hot_keys *h = calloc(1, sizeof *h);
    if (!h)
        return RL_ENOMEM;
    h->e = calloc(cap, sizeof *h->e);
    h->index = calloc(places, sizeof *h->index);
    h->free = malloc(cap * sizeof *h->free);
    if (!h->e || !h->index || !h->free) {
        free(h->e);
        free(h->index);
        free(h->free);
        free(h);
        return RL_ENOMEM;
    }
    atomic_init(&h->locked, false);
    h->cap = cap;
    h->mask = places - 1;
    for (uint32_t e = 0; e < cap; e++)
        h->free[h->nfree++] = cap - 1 - e;
    *out = h;
    return 0;
}

void rl__hot_keys_free(rl__hot_keys *h)
{
    if (!h)
        return;
    free(h->e);
    free(h->index);
    free(h->free);
    free(h);
}

size_t rl__hot_keys_bytes(const rl__hot_keys *h)
{
    return h ? sizeof *h + h->cap * (sizeof *h->e + sizeof *h->free) +
                   (size_t)(h->mask + 1) * sizeof *h->index
             : 0;
}

void rl__hot_add(rl__hot_keys *h, uint64_t hash, const void *key, size_t key_len)
{
    hot_lock(h);
    uint32_t i = place_of(h, hash);
    if (h->index[i]) {
        h->e[h->index[i] - 1].jobs++;
    } else if (h->nfree) {
        uint32_t e = h->free[--h->nfree];
        rl__hot_entry *x = &h->e[e];
        x->hash = hash;
        x->jobs = 1;
        x->key_len = key_len;
        x->stored =
            (uint8_t)(key_len < RL_DISPATCH_HOT_KEY_BYTES ? key_len : RL_DISPATCH_HOT_KEY_BYTES);
        if (x->stored)
            memcpy(x->key, key, x->stored);
        h->index[i] = e + 1;
    } else {
        round_down(h); /* the new job is the one more that the round forgets */
    }
    hot_unlock(h);
}

/* Under the lock: a job of hash ended. */
static void hot_end_one(rl__hot_keys *h, uint64_t hash)
{
    uint32_t i = place_of(h, hash);
    if (!h->index[i])
        return; /* not followed (any more): forgotten by a round */
    uint32_t e = h->index[i] - 1;
    if (--h->e[e].jobs == 0) {
        index_remove(h, i);
        h->free[h->nfree++] = e;
    }
}

void rl__hot_end(rl__hot_keys *h, const rl__jobq *q)
{
    if (!q->head)
        return;
    hot_lock(h);
    for (const rl__job *j = q->head; j; j = j->next)
        hot_end_one(h, j->pub.hash);
    hot_unlock(h);
}

static int hotter(const void *a, const void *b)
{
    const rl_dispatch_hot_key *x = a, *y = b;
    if (x->jobs != y->jobs)
        return x->jobs < y->jobs ? 1 : -1;
    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

int rl__hot_keys_read(rl_dispatcher_t *d, rl__stats_scratch *sc, size_t *n, uint64_t *rounds)
{
    rl__hot_keys *h = d->hot;
    *n = 0;
    *rounds = 0;
    if (!h)
        return 0;
    if (h->cap > sc->hot_cap) {
        void *p = realloc(sc->hot, h->cap * sizeof *sc->hot);
        if (!p)
            return RL_ENOMEM;
        sc->hot = p;
        sc->hot_cap = h->cap;
    }
    size_t k = 0;
    hot_lock(h);
    for (uint32_t e = 0; e < h->cap; e++) {
        const rl__hot_entry *x = &h->e[e];
        if (!x->jobs)
            continue;
        rl_dispatch_hot_key *o = &sc->hot[k++];
        o->hash = x->hash;
        o->jobs = x->jobs;
        o->key_len = x->key_len;
        o->stored = x->stored;
        memcpy(o->key, x->key, x->stored);
        o->lane[0] = '\0';
    }
    *rounds = h->rounds;
    hot_unlock(h);
    qsort(sc->hot, k, sizeof *sc->hot, hotter);
    /* The lane each key has now: the route, read as the statistics read it. */
    pthread_rwlock_rdlock(&d->route_lock);
    if (d->route.n)
        for (size_t i = 0; i < k; i++) {
            const char *name = d->route.lanes[rl__route_node(&d->route, sc->hot[i].hash)]->name;
            size_t len = strlen(name);
            memcpy(sc->hot[i].lane, name, len + 1);
        }
    pthread_rwlock_unlock(&d->route_lock);
    *n = k;
    return 0;
}

int rl_dispatch_hot_keys(rl_dispatcher_t *d, rl_dispatch_hot_key *out, size_t cap, size_t *n)
{
    if (n)
        *n = 0;
    if (!d || (!out && cap))
        return RL_EINVAL;
    rl__stats_scratch sc = {0};
    size_t k = 0;
    uint64_t rounds;
    rl__enter(d);
    int rc = rl__hot_keys_read(d, &sc, &k, &rounds);
    rl__leave(d);
    if (!rc) {
        if (k && cap)
            memcpy(out, sc.hot, (k < cap ? k : cap) * sizeof *out);
        if (n)
            *n = k;
    }
    rl__stats_scratch_free(&sc);
    return rc;
}
