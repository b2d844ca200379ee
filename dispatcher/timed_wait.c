/* SPDX-License-Identifier: BSD-2-Clause */
/* Waiting on a condition variable until a deadline that may lie arbitrarily far ahead. */
#include "dispatch_internal.h"

#define PIECE_NS (3600ull * 1000000000ull) /* the longest single wait: an hour */

uint64_t rl__deadline_after_ms(uint64_t timeout_ms)
{
    uint64_t now = uv_hrtime();
    if (timeout_ms > (UINT64_MAX - 1 - now) / 1000000u)
        return UINT64_MAX;
    return now + timeout_ms * 1000000u;
}

void rl__cond_wait_until(uv_cond_t *cv, uv_mutex_t *mu, uint64_t deadline_ns)
{
    if (deadline_ns == UINT64_MAX) {
        uv_cond_wait(cv, mu);
        return;
    }
    uint64_t now = uv_hrtime();
    if (now >= deadline_ns)
        return;
    uint64_t left = deadline_ns - now;
    (void)uv_cond_timedwait(cv, mu, left < PIECE_NS ? left : PIECE_NS);
}
