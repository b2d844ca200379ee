/* SPDX-License-Identifier: BSD-2-Clause */
/* The rate limit: a token bucket (lib/token_bucket.h) that every accepted submission takes a
 * token from. A submission that finds it empty is refused with RL_EAGAIN, as a full lane
 * refuses; the refusal sets one entry of the dispatcher's timer heap (timers.c) for when the
 * next token is due, and that entry, on the loop, calls on_capacity (through
 * rl__check_capacity) and wakes the submitters waiting for room. Nothing sleeps; nothing ticks
 * while no submission is refused. */
#include "dispatch_internal.h"

int rl__rate_init(rl_dispatcher_t *d)
{
    d->rate_on = d->opts.max_rate > 0;
    if (!d->rate_on)
        return 0;
    if (uv_mutex_init(&d->rate_mu) != 0)
        return RL_ELOOP; /* not reached on Linux */
    rl__bucket_init(&d->bucket, d->opts.max_rate, d->opts.max_burst, uv_hrtime());
    return 0;
}

void rl__rate_free(rl_dispatcher_t *d)
{
    if (d->rate_on)
        uv_mutex_destroy(&d->rate_mu);
}

size_t rl__rate_take(rl_dispatcher_t *d, size_t want)
{
    rl__lock(&d->rate_mu);
    size_t got = rl__bucket_take(&d->bucket, uv_hrtime(), want);
    rl__unlock(&d->rate_mu);
    return got;
}

void rl__rate_give_back(rl_dispatcher_t *d, size_t n)
{
    rl__lock(&d->rate_mu);
    rl__bucket_give_back(&d->bucket, n);
    rl__unlock(&d->rate_mu);
}

void rl__rate_arm(rl_dispatcher_t *d)
{
    if (atomic_exchange(&d->rate_timer_set, true))
        return;
    rl__lock(&d->rate_mu);
    uint64_t now = uv_hrtime();
    uint64_t due = now + rl__bucket_wait_ns(&d->bucket, now);
    rl__unlock(&d->rate_mu);
    if (rl__timer_add(d, (rl__timer_entry){.due_ns = due, .kind = RL__TIMER_RATE}) != 0) {
        /* Out of memory for the entry: the next refusal tries again, and a waiting submitter
         * looks again within its own wait. */
        atomic_store(&d->rate_timer_set, false);
    }
}

void rl__rate_refused(rl_dispatcher_t *d, bool waiting, uint64_t count)
{
    atomic_fetch_add_explicit(&d->refused, count, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->rate_limited, count, memory_order_relaxed);
    if (waiting)
        atomic_store(&d->blocked_rate, true);
    if (d->opts.on_capacity)
        atomic_store(&d->refused_rate, true);
    if (waiting || d->opts.on_capacity)
        rl__rate_arm(d);
}

bool rl__rate_has_token(rl_dispatcher_t *d)
{
    rl__lock(&d->rate_mu);
    bool has = rl__bucket_wait_ns(&d->bucket, uv_hrtime()) == 0;
    rl__unlock(&d->rate_mu);
    return has;
}

void rl__rate_due(rl_dispatcher_t *d)
{
    atomic_store(&d->rate_timer_set, false);
    if (atomic_load(&d->closing))
        return;
    if (!atomic_load(&d->blocked_rate) && !atomic_load(&d->refused_rate))
        return; /* nobody waits for this token */
    /* No token yet (another submitter took it): wait for the next one. */
    if (!rl__rate_has_token(d)) {
        rl__rate_arm(d);
        return;
    }
    if (atomic_exchange(&d->blocked_rate, false))
        rl__space_notify(d);
    rl__check_capacity(d);
}
