/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: error codes.
 *
 * Every public function that can fail returns 0 on success or one of the negative RL_E* codes
 * below; rl_strerror() describes a code and rl_err_name() gives its symbol. The values are part
 * of the ABI and never change meaning.
 */
#ifndef RINGLANE_ERROR_H
#define RINGLANE_ERROR_H

#include "ringlane/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message) */
#define RL_ERRNO_MAP(X)                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(EEMPTY, -3, "the ring has no members")                                                       \
    X(EVNODES, -4, "vnodes not taken by the profile")                                              \
    X(EWEIGHT, -5, "weight not taken by the profile (1..RL_WEIGHT_MAX, some profiles 1 only)")     \
    X(ENAME, -6, "name not valid (empty, over RL_NAME_MAX bytes, or refused by the profile)")      \
    X(EDUPNAME, -7, "duplicate member name")                                                       \
    X(ENOENT, -8, "no such member")                                                                \
    X(EPROFILE, -9, "unknown profile")                                                             \
    X(ERANGE, -10, "value out of range")                                                           \
    X(ETOOBIG, -11, "too many points (limit RL_POINTS_MAX)")                                       \
    X(EBADKEY, -12, "key is not valid for this profile")                                           \
    X(ENOTSUP, -13, "operation not supported by this profile")                                     \
    X(EAGAIN, -14, "resource temporarily unavailable (queue full)")                                \
    X(ECLOSED, -15, "closed or shutting down")                                                     \
    X(ETIMEDOUT, -16, "timed out")                                                                 \
    X(EBUSY, -17, "busy")                                                                          \
    X(ESTATE, -18, "operation not valid in the current state")                                     \
    X(EKAFKA, -19, "Kafka client error")                                                           \
    X(ELOOP, -20, "event loop error")                                                              \
    X(ESTALE, -21, "no job waits for this ticket (completed, timed out, handed back, or unknown)")

enum rl_errno {
#define RL__ERRNO_ENUM(name, value, msg) RL_##name = value,
    RL_ERRNO_MAP(RL__ERRNO_ENUM)
#undef RL__ERRNO_ENUM
        RL_OK = 0
};

/* A static, human-readable description of err ("unknown error" for codes not listed above). */
RL_EXTERN const char *rl_strerror(int err);

/* The symbol of err, e.g. "RL_EINVAL" ("RL_OK" for 0, "RL_UNKNOWN" otherwise). */
RL_EXTERN const char *rl_err_name(int err);

/* Why: the code says what kind of mistake, the detail says which. */
#define RL_ERROR_DETAIL_MAX 512 /* bytes of a detail, the terminating NUL included */

/* The detail of the last refusal on this thread by a function that says why: one line naming
 * the argument or option as written in C, the value given and the reason, in the words of
 * docs/errors.md, e.g. "lane_capacity 0: a lane must hold at least one job (1..4294967295)";
 * options that come through another's are named by their path ("dispatch.lane_capacity 0",
 * "ring->vnodes 1000"), and resource failures by what could not be made ("out of memory: ...",
 * librdkafka's own message). "" when the last such call succeeded, or none was made. Each
 * function that says why clears it when it starts, so the text is about the latest call; it
 * stays until the next one on this thread. Thread-local: calls on other threads never change
 * it. The functions that say why: rl_ring_build, rl_ring_add, rl_ring_remove,
 * rl_snapshot_create, rl_kafka_partitioner_new, rl_kafka_partitioner_option_set,
 * rl_dispatch_init, rl_dispatch_add_lane, rl_dispatch_remove_lane, rl_consumer_new (see
 * docs/errors.md). Never NULL.
 *
 *     if (rc) fprintf(stderr, "rl_dispatch_init: %s: %s\n", rl_strerror(rc),
 *                     rl_last_error_detail()); */
RL_EXTERN const char *rl_last_error_detail(void);

/* Records the detail rl_last_error_detail() gives on this thread (printf format; cut, still
 * terminated, at RL_ERROR_DETAIL_MAX - 1 bytes) and returns err, so a refusal reads
 * `return rl_error_detail_set(RL_EINVAL, "lanes NULL with lane_count %zu", n);`.
 * For ringlane's own layers and for libraries built on ringlane that want their refusals read
 * the same way. */
RL_EXTERN int rl_error_detail_set(int err, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clears this thread's detail (rl_last_error_detail() answers ""). */
RL_EXTERN void rl_error_detail_clear(void);

#ifdef __cplusplus
}
#endif
#endif
