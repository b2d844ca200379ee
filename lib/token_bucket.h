/* SPDX-License-Identifier: BSD-2-Clause */
/* A token bucket: the arithmetic of a rate limit, on a clock the caller reads and passes in
 * (nanoseconds, monotonic: uv_hrtime). Pure, so the tests drive it with a fake clock; the
 * dispatcher (under its lock) and the consumer (on its loop) each keep one. Header-only: the
 * core's internal symbols are hidden in the shared libraries, and both layers need it.
 *
 * The bucket holds up to `burst` tokens and gains `rate` per second; a job (or message) takes
 * one. It starts full, so the first `burst` go at once; after that, over any span of T seconds
 * at most burst + rate * T are taken. Tokens are counted in a double: the fraction matters at
 * low rates, and 2^53 is far beyond any burst. */
#ifndef RINGLANE_TOKEN_BUCKET_H
#define RINGLANE_TOKEN_BUCKET_H

#include "ringlane/error.h"

#include <math.h> /* isnan, isinf: macros, no libm */
#include <stddef.h>
#include <stdint.h>

/* The limits of an option max_rate (per second): 0 is no limit. Below the least, one token
 * would take more than about 17 minutes; above the most, no submission path keeps up, and the
 * refill arithmetic would lose its fraction. */
#define RL__RATE_MIN 0.001
#define RL__RATE_MAX 1e9

/* A token short of a whole by less than this counts as whole: the refill of exactly the time a
 * token was due for may round to 0.99999999999..., and a timer set for it must find it. A
 * billionth of a token: far above the rounding of a double below one token, far below a token
 * (a microsecond at the slowest rate). */
#define RL__BUCKET_EPSILON 1e-9

/* The options of a rate limit, checked the same way wherever they are given: 0 or
 * RL__RATE_MIN..RL__RATE_MAX per second, and with a rate a burst of at least one token; a burst
 * without a rate is refused too (it would limit nothing). `rate` and `burst` are the options'
 * names as the caller writes them, `what` what is counted ("jobs", "messages"). 0, or RL_EINVAL
 * with the detail set. */
static inline int rl__rate_check(double rate, uint32_t burst, const char *rate_name,
                                 const char *burst_name, const char *what)
{
    if (isnan(rate) || isinf(rate))
        return rl_error_detail_set(RL_EINVAL,
                                   "%s %g: not a number of %s per second (0 for no limit, "
                                   "else %g..%g)",
                                   rate_name, rate, what, RL__RATE_MIN, RL__RATE_MAX);
    if (rate < 0)
        return rl_error_detail_set(RL_EINVAL,
                                   "%s %g: a rate cannot be negative (0 for no limit, else "
                                   "%g..%g %s per second)",
                                   rate_name, rate, RL__RATE_MIN, RL__RATE_MAX, what);
    if (rate > 0 && rate < RL__RATE_MIN)
        return rl_error_detail_set(RL_EINVAL,
                                   "%s %g: below %g %s per second (one in about 17 minutes); 0 "
                                   "for no limit",
                                   rate_name, rate, RL__RATE_MIN, what);
    if (rate > RL__RATE_MAX)
        return rl_error_detail_set(RL_EINVAL,
                                   "%s %g: over %g %s per second, beyond what a limit can "
                                   "time; 0 for no limit",
                                   rate_name, rate, RL__RATE_MAX, what);
    if (rate > 0 && burst == 0)
        return rl_error_detail_set(RL_EINVAL,
                                   "%s 0 with %s %g: the bucket must hold at least one token "
                                   "(1..4294967295)",
                                   burst_name, rate_name, rate);
    if (rate == 0 && burst)
        return rl_error_detail_set(RL_EINVAL,
                                   "%s %u without %s: a burst belongs to a rate limit (set %s, "
                                   "or leave %s 0)",
                                   burst_name, burst, rate_name, rate_name, burst_name);
    return 0;
}

typedef struct rl__bucket {
    double rate;    /* tokens per second, > 0 */
    double burst;   /* the most tokens held, >= 1 */
    double tokens;  /* held at at_ns (may be a hair below 0: see RL__BUCKET_EPSILON) */
    uint64_t at_ns; /* the clock of the last refill */
} rl__bucket;

/* A full bucket at now_ns. */
static inline void rl__bucket_init(rl__bucket *b, double rate, uint32_t burst, uint64_t now_ns)
{
    b->rate = rate;
    b->burst = burst;
    b->tokens = burst;
    b->at_ns = now_ns;
}

/* Adds what the time since the last refill brought, up to burst. A clock read before another
 * thread's later refill (now_ns behind at_ns) adds nothing. */
static inline void rl__bucket_refill(rl__bucket *b, uint64_t now_ns)
{
    if (now_ns <= b->at_ns)
        return;
    b->tokens += (double)(now_ns - b->at_ns) * b->rate / 1e9;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
    b->at_ns = now_ns;
}

/* Whole tokens held now (after a refill). */
static inline size_t rl__bucket_whole(const rl__bucket *b)
{
    double t = b->tokens + RL__BUCKET_EPSILON;
    return t < 1 ? 0 : (size_t)t; /* t > 0: the cast is floor, without libm */
}

/* Takes up to `want` tokens at now_ns; returns how many it took (0: the bucket is empty). */
static inline size_t rl__bucket_take(rl__bucket *b, uint64_t now_ns, size_t want)
{
    rl__bucket_refill(b, now_ns);
    size_t have = rl__bucket_whole(b);
    size_t got = have < want ? have : want;
    b->tokens -= (double)got;
    return got;
}

/* Gives back tokens taken and not used (a job refused after its token was taken). */
static inline void rl__bucket_give_back(rl__bucket *b, size_t n)
{
    b->tokens += (double)n;
    if (b->tokens > b->burst)
        b->tokens = b->burst;
}

/* Nanoseconds from now_ns until a whole token is held (0: one is now). Refills first. */
static inline uint64_t rl__bucket_wait_ns(rl__bucket *b, uint64_t now_ns)
{
    rl__bucket_refill(b, now_ns);
    if (rl__bucket_whole(b))
        return 0;
    double missing = 1.0 - b->tokens; /* > RL__BUCKET_EPSILON */
    double ns = missing * 1e9 / b->rate;
    uint64_t whole = (uint64_t)ns;       /* rate >= RL__RATE_MIN: under 1e12 ns, no overflow */
    return whole + ((double)whole < ns); /* rounded up: the token is there when asked */
}

#endif
