/* SPDX-License-Identifier: BSD-2-Clause */
/* The statistics timer's options, checked alike by the dispatcher and the consumer (which takes
 * its own and refuses the dispatcher's). Not installed. */
#ifndef RINGLANE_STATS_OPTIONS_H
#define RINGLANE_STATS_OPTIONS_H

#include "error_detail_internal.h"
#include "ringlane/dispatcher.h"

#include <inttypes.h>
#include <stdbool.h>

/* 0, or RL_EINVAL with the detail: the interval out of range, an interval without on_stats,
 * too many lanes (`full_text` names what gives them all). */
static inline int rl__stats_options_check(int64_t interval_ms, bool has_on_stats, uint32_t lanes,
                                          const char *full_text)
{
    if (interval_ms < 0 || interval_ms > RL_DISPATCH_STATS_INTERVAL_MAX_MS)
        return rl_error_detail_set(
            RL_EINVAL, "stats_interval_ms %" PRId64 ": %s (0 = off, 1..%d ms)", interval_ms,
            interval_ms < 0 ? "negative" : "over a day, the longest interval",
            RL_DISPATCH_STATS_INTERVAL_MAX_MS);
    if (interval_ms && !has_on_stats)
        return rl_error_detail_set(RL_EINVAL,
                                   "stats_interval_ms %" PRId64 " with on_stats NULL: nothing "
                                   "would get the statistics",
                                   interval_ms);
    if (lanes > RL_DISPATCH_STATS_LANES_MAX)
        return rl_error_detail_set(RL_EINVAL,
                                   "stats_lanes %u: over RL_DISPATCH_STATS_LANES_MAX (%u lanes in "
                                   "the compact statistics; stats_full gives %s)",
                                   lanes, RL_DISPATCH_STATS_LANES_MAX, full_text);
    return 0;
}

#endif
