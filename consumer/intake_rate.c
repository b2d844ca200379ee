/* SPDX-License-Identifier: BSD-2-Clause */
/* The consumer's rate limit (max_rate messages a second, max_burst at once): a token bucket
 * (lib/token_bucket.h) on the loop thread that every message handed to the dispatcher takes a
 * token from. A message that finds it empty is kept, in order, as a message the lanes refused
 * is (flow.c): its partition keeps what it polls behind it and pauses at pending_max kept, the
 * one pause of the consumer's flow control, and resumes once half of them are gone. A one-shot
 * timer set to when the next token is due hands the kept messages over; nothing sleeps. */
#include "consumer_internal.h"

void rl__intake_init(rl_consumer_t *c)
{
    c->rate_on = c->opts.max_rate > 0;
    if (c->rate_on)
        rl__bucket_init(&c->bucket, c->opts.max_rate, c->opts.max_burst, uv_hrtime());
}

static void on_token_due(uv_timer_t *t)
{
    rl_consumer_t *c = t->data;
    if (!c->closing)
        rl__drain_all_pending(c); /* from the partition after the last call's first */
}

bool rl__intake_take(rl_consumer_t *c)
{
    if (!c->rate_on)
        return true;
    uint64_t now = uv_hrtime();
    if (rl__bucket_take(&c->bucket, now, 1))
        return true;
    c->stats.rate_limited++;
    if (!uv_is_active((uv_handle_t *)&c->rate_timer)) {
        uint64_t ns = rl__bucket_wait_ns(&c->bucket, now);
        uv_timer_start(&c->rate_timer, on_token_due, (ns + 999999u) / 1000000u, 0);
    }
    return false;
}

void rl__intake_give_back(rl_consumer_t *c)
{
    if (c->rate_on)
        rl__bucket_give_back(&c->bucket, 1);
}
