/* SPDX-License-Identifier: BSD-2-Clause */
/* Timers on the loop: retries that are due, and asynchronous attempts past their deadline. One
 * uv_timer_t for the earliest entry of a binary heap; other threads leave their entries in a
 * request list that the loop moves into the heap. No thread sleeps through a retry's delay. */
#include "dispatch_internal.h"

#include <stdlib.h>

static int heap_reserve(rl__timer_heap *h, size_t n)
{
    if (n <= h->cap)
        return 0;
    size_t cap = h->cap ? h->cap * 2 : 64;
    while (cap < n)
        cap *= 2;
    rl__timer_entry *v = realloc(h->v, cap * sizeof *v);
    if (!v)
        return RL_ENOMEM;
    h->v = v;
    h->cap = cap;
    return 0;
}

static void heap_push(rl__timer_heap *h, rl__timer_entry e)
{
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent].due_ns <= e.due_ns)
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = e;
}

static rl__timer_entry heap_pop(rl__timer_heap *h)
{
    rl__timer_entry top = h->v[0], last = h->v[--h->len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && h->v[c + 1].due_ns < h->v[c].due_ns)
            c++;
        if (last.due_ns <= h->v[c].due_ns)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->len)
        h->v[i] = last;
    return top;
}

uint64_t rl__timers_next(rl_dispatcher_t *d)
{
    rl__timers_take_requests(d);
    return d->heap.len ? d->heap.v[0].due_ns : UINT64_MAX;
}

static void on_timer(uv_timer_t *t);

/* Loop thread: the timer fires at the earliest entry. */
static void arm(rl_dispatcher_t *d)
{
    if (!d->heap.len) {
        uv_timer_stop(&d->timer);
        return;
    }
    uint64_t now = uv_hrtime(), due = d->heap.v[0].due_ns;
    uint64_t ms = due > now ? (due - now + 999999u) / 1000000u : 0;
    uv_timer_start(&d->timer, on_timer, ms, 0);
}

/* Loop thread: an entry whose time has come. */
static void fire(rl_dispatcher_t *d, rl__timer_entry e)
{
    if (e.kind == RL__TIMER_PARK) {
        rl__park_due(d, e.park);
        return;
    }
    if (e.kind == RL__TIMER_RATE) {
        rl__rate_due(d);
        return;
    }
    rl__lane *l = e.lane;
    rl__lock(&l->mu);
    l->timer_refs--;
    /* A retry still in the same delay (not ended by take_tag or a close meanwhile) runs again. */
    if (e.kind == RL__TIMER_RETRY && l->in_backoff && l->gen == e.id && l->cur_job) {
        l->in_backoff = false;
        l->retry_due = true;
        rl__lane_ready(l);
    }
    bool last = rl__lane_wants_loop(l);
    rl__unlock(&l->mu);
    if (last)
        uv_async_send(&d->async);
    if (e.kind == RL__TIMER_RETRY)
        return;
    /* A deadline: the attempt fails as if completed with RL_ETIMEDOUT, unless it was
     * completed (or its job handed back) first. */
    rl__lane *claimed;
    rl__job *j;
    if (rl__attempt_claim(d, e.id, &claimed, &j) == 0)
        rl__attempt_ended(claimed, j, RL_ETIMEDOUT);
}

uint64_t rl__timers_run(rl_dispatcher_t *d)
{
    rl__timers_take_requests(d);
    uint64_t now = uv_hrtime();
    while (d->heap.len && d->heap.v[0].due_ns <= now)
        fire(d, heap_pop(&d->heap));
    arm(d);
    return d->heap.len ? d->heap.v[0].due_ns : UINT64_MAX;
}

static void on_timer(uv_timer_t *t)
{
    rl__timers_run(t->data);
}

int rl__timers_init(rl_dispatcher_t *d)
{
    return uv_mutex_init(&d->timer_mu) != 0 ? RL_ELOOP : 0;
}

void rl__timers_start(rl_dispatcher_t *d)
{
    uv_timer_init(d->loop, &d->timer); /* cannot fail */
    d->timer.data = d;
}

int rl__timer_add(rl_dispatcher_t *d, rl__timer_entry e)
{
    if (rl__on_loop_thread(d)) {
        rl__timers_take_requests(d);
        if (heap_reserve(&d->heap, d->heap.len + 1) != 0)
            return RL_ENOMEM;
        heap_push(&d->heap, e);
        if (d->heap.v[0].due_ns == e.due_ns)
            arm(d); /* the new earliest */
        return 0;
    }
    rl__lock(&d->timer_mu);
    int rc = heap_reserve(&d->requests, d->requests.len + 1);
    if (!rc)
        d->requests.v[d->requests.len++] = e;
    rl__unlock(&d->timer_mu);
    if (!rc) {
        uv_async_send(&d->async); /* the loop takes it into the heap */
        if (atomic_load(&d->tag_waiters) > 0) {
            /* rl_dispatch_wait_tag on the loop thread runs the timers while it waits. */
            rl__lock(&d->wait_mu);
            uv_cond_broadcast(&d->wait_cv);
            rl__unlock(&d->wait_mu);
        }
    }
    return rc;
}

bool rl__timers_pending(rl_dispatcher_t *d)
{
    rl__lock(&d->timer_mu);
    bool pending = d->requests.len > 0;
    rl__unlock(&d->timer_mu);
    return pending;
}

void rl__timers_take_requests(rl_dispatcher_t *d)
{
    rl__lock(&d->timer_mu);
    size_t n = d->requests.len;
    bool room = heap_reserve(&d->heap, d->heap.len + n) == 0;
    if (room) {
        for (size_t i = 0; i < n; i++)
            heap_push(&d->heap, d->requests.v[i]);
        d->requests.len = 0;
    }
    rl__unlock(&d->timer_mu);
    if (n && room)
        arm(d);
}

void rl__timers_free(rl_dispatcher_t *d)
{
    /* Parks are freed by their entries; the close left none holding jobs. */
    for (size_t i = 0; i < d->heap.len; i++)
        if (d->heap.v[i].kind == RL__TIMER_PARK)
            free(d->heap.v[i].park);
    for (size_t i = 0; i < d->requests.len; i++)
        if (d->requests.v[i].kind == RL__TIMER_PARK)
            free(d->requests.v[i].park);
    free(d->heap.v);
    free(d->requests.v);
    d->heap = (rl__timer_heap){0};
    d->requests = (rl__timer_heap){0};
    uv_mutex_destroy(&d->timer_mu);
}
