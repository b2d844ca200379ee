/* SPDX-License-Identifier: BSD-2-Clause */
/* The demo's order checker. Every event carries its key's sequence number; every handler call
 * checks it against the next one expected for the key, shared by all consumers of the process:
 * lower is a redelivery (a duplicate: at-least-once delivery after a rebalance), higher is a
 * skipped event (an order violation), and a key found in two handlers at once is a violation
 * too. */
#define _POSIX_C_SOURCE 200809L
#include "demo.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int demo_check_init(demo_check *ck, int keys, uint64_t run, bool anchored)
{
    memset(ck, 0, sizeof *ck);
    ck->keys = keys;
    ck->run = run;
    ck->anchored = anchored;
    ck->next = malloc((size_t)keys * sizeof *ck->next);
    ck->busy = malloc((size_t)keys * sizeof *ck->busy);
    ck->gen = malloc((size_t)keys * sizeof *ck->gen);
    if (!ck->next || !ck->busy || !ck->gen) {
        demo_check_free(ck);
        return -1;
    }
    for (int i = 0; i < keys; i++) {
        atomic_init(&ck->next[i], anchored ? -1 : 0);
        atomic_init(&ck->busy[i], 0);
        atomic_init(&ck->gen[i], 0);
    }
    for (int i = 0; i < DEMO_PARTITIONS_MAX; i++)
        atomic_init(&ck->part_gen[i], 0);
    return 0;
}

void demo_check_free(demo_check *ck)
{
    free(ck->next);
    free(ck->busy);
    free(ck->gen);
    ck->next = NULL;
    ck->busy = NULL;
    ck->gen = NULL;
}

static void spin_us(int us)
{
    if (us <= 0)
        return;
    uint64_t end = demo_now_ns() + (uint64_t)us * 1000u;
    while (demo_now_ns() < end)
        ;
}

int demo_check_message(demo_check *ck, const rd_kafka_message_t *m)
{
    char v[96], word[16];
    if (!m->payload || m->len >= sizeof v) {
        atomic_fetch_add(&ck->foreign, 1);
        return 0;
    }
    memcpy(v, m->payload, m->len);
    v[m->len] = '\0';
    unsigned long long run;
    int k;
    long long seq;
    if (sscanf(v, "%llx %15s", &run, word) != 2 || (ck->run && run != ck->run)) {
        atomic_fetch_add(&ck->foreign, 1);
        return 0;
    }
    if (strcmp(word, "poison") == 0) {
        atomic_fetch_add(&ck->poison_calls, 1);
        return -1;
    }
    if (strcmp(word, "keyless") == 0) {
        atomic_fetch_add(&ck->keyless, 1);
        return 0;
    }
    if (sscanf(v, "%llx %d %lld", &run, &k, &seq) != 3 || k < 0 || k >= ck->keys) {
        atomic_fetch_add(&ck->foreign, 1);
        return 0;
    }
    if (atomic_exchange(&ck->busy[k], 1))
        atomic_fetch_add(&ck->overlaps, 1);
    spin_us(atomic_load_explicit(&ck->work_us, memory_order_relaxed));
    int64_t next = atomic_load(&ck->next[k]);
    if (ck->anchored && m->partition >= 0 && m->partition < DEMO_PARTITIONS_MAX) {
        /* Its partition came (back) to this process, or the key came in another partition (a
         * topic that grew moves keys to new partitions): another process may have handled the
         * part in between, so the key's check starts again here. The partition is part of the
         * mark: two partitions' assignment counts may be equal. */
        uint32_t g =
            (uint32_t)m->partition << 24 | (atomic_load(&ck->part_gen[m->partition]) & 0xffffffu);
        if (atomic_load(&ck->gen[k]) != g) {
            atomic_store(&ck->gen[k], g);
            next = -1;
        }
    }
    if (next >= 0 && seq < next) {
        atomic_fetch_add(&ck->duplicates, 1);
        int phase = atomic_load(&ck->phase);
        atomic_fetch_add(&ck->dup_in_phase[phase < DEMO_PHASES_MAX ? phase : 0], 1);
    } else {
        if (next >= 0 && seq > next)
            atomic_fetch_add(&ck->violations, 1);
        atomic_store(&ck->next[k], seq + 1);
        atomic_fetch_add(&ck->unique, 1);
    }
    atomic_fetch_add(&ck->handled, 1);
    long long now = (long long)demo_now_ns();
    long long zero = 0;
    atomic_compare_exchange_strong(&ck->first_ns, &zero, now);
    atomic_store(&ck->last_ns, now);
    atomic_store(&ck->busy[k], 0);
    return 0;
}

long demo_check_missing(demo_check *ck, const long *per_key)
{
    long missing = 0;
    for (int k = 0; k < ck->keys; k++) {
        int64_t next = atomic_load(&ck->next[k]);
        if (next < 0)
            next = 0;
        if (per_key[k] > next)
            missing += per_key[k] - next;
    }
    return missing;
}
