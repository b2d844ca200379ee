/* SPDX-License-Identifier: BSD-2-Clause */
/* Shared by the dispatcher suites: a gate that holds handlers, and a wait for a retry. */
#ifndef RINGLANE_DISPATCH_UTIL_H
#define RINGLANE_DISPATCH_UTIL_H

#include "test_util.h"

#include "ringlane/dispatcher.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

/* Handlers that meet a closed gate wait there; tests wait until N handlers have arrived. */
typedef struct gate {
    uv_mutex_t mu;
    uv_cond_t cv;
    bool open;
    int arrived;
} gate;

static inline void gate_init(gate *g, bool open)
{
    assert_int_equal(uv_mutex_init(&g->mu), 0);
    assert_int_equal(uv_cond_init(&g->cv), 0);
    g->open = open;
    g->arrived = 0;
}

static inline void gate_destroy(gate *g)
{
    uv_cond_destroy(&g->cv);
    uv_mutex_destroy(&g->mu);
}

static inline void gate_pass(gate *g)
{
    uv_mutex_lock(&g->mu);
    g->arrived++;
    uv_cond_broadcast(&g->cv);
    while (!g->open)
        uv_cond_wait(&g->cv, &g->mu);
    uv_mutex_unlock(&g->mu);
}

static inline void gate_set(gate *g, bool open)
{
    uv_mutex_lock(&g->mu);
    g->open = open;
    uv_cond_broadcast(&g->cv);
    uv_mutex_unlock(&g->mu);
}

/* Waits until `n` handlers have reached the gate in all. */
static inline void gate_wait_arrived(gate *g, int n)
{
    uv_mutex_lock(&g->mu);
    while (g->arrived < n)
        uv_cond_wait(&g->cv, &g->mu);
    uv_mutex_unlock(&g->mu);
}

/* Waits until the first lane the statistics list has retried `n` attempts: with a long backoff,
 * until its failed job waits for its retry. Polls; the test's timeout ends a wait that lasts. */
static inline void wait_retried(rl_dispatcher_t *d, uint64_t n)
{
    for (;;) {
        rl_dispatch_stats s;
        rl_dispatch_lane_stats ls;
        assert_rl_ok(rl_dispatch_stats_get(d, &s, &ls, 1, NULL));
        if (ls.retried == n)
            return;
        sched_yield();
    }
}

#endif
