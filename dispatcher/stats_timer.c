/* SPDX-License-Identifier: BSD-2-Clause */
/* The statistics on a timer (stats_interval_ms, on_stats): a uv_timer on the loop that writes
 * the JSON into a buffer it keeps and hands it to on_stats. The timer is unreferenced, so it
 * never keeps the loop alive, and it closes with the dispatcher's other handles. The buffer
 * and the scratch memory grow to what the text needs and are reused, so a tick allocates
 * nothing once they have grown. */
#include "dispatch_internal.h"

#include <stdint.h>
#include <stdlib.h>

/* Attempts per tick to fit a text that grew since the buffer was sized (busy lanes come and go
 * between the length asked and the text written). */
#define STATS_TRIES 4

static void on_stats_tick(uv_timer_t *t)
{
    rl_dispatcher_t *d = t->data;
    if (d->close_done)
        return;
    size_t max_lanes = d->opts.stats_full ? SIZE_MAX : d->opts.stats_lanes;
    size_t need = 0;
    int rc = RL_ERANGE;
    for (int tries = 0; tries < STATS_TRIES && rc == RL_ERANGE; tries++) {
        if (tries) {
            size_t cap = need + need / 8 + 256; /* room for a few more busy lanes */
            char *p = realloc(d->stats_text, cap);
            if (!p)
                return; /* out of memory: this tick is skipped, the next one tries again */
            d->stats_text = p;
            d->stats_text_cap = cap;
        }
        rc = rl__stats_json(d, max_lanes, &d->stats_scratch, d->stats_text, d->stats_text_cap,
                            &need);
    }
    if (rc == 0)
        d->opts.on_stats(d, d->stats_text, need);
}

void rl__stats_timer_init(rl_dispatcher_t *d)
{
    uv_timer_init(d->loop, &d->stats_timer); /* cannot fail */
    d->stats_timer.data = d;
    uv_unref((uv_handle_t *)&d->stats_timer);
    if (d->opts.stats_interval_ms > 0)
        uv_timer_start(&d->stats_timer, on_stats_tick, (uint64_t)d->opts.stats_interval_ms,
                       (uint64_t)d->opts.stats_interval_ms);
}

void rl__stats_timer_close(rl_dispatcher_t *d, uv_close_cb cb)
{
    uv_timer_stop(&d->stats_timer);
    uv_close((uv_handle_t *)&d->stats_timer, cb);
}

void rl__stats_timer_free(rl_dispatcher_t *d)
{
    rl__stats_scratch_free(&d->stats_scratch);
    free(d->stats_text);
    d->stats_text = NULL;
    d->stats_text_cap = 0;
}
