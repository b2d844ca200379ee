/* SPDX-License-Identifier: BSD-2-Clause */
/* The per-partition offset window: which dispatched offsets have completed, and the highest
 * offset below which everything has. Not installed; used by the consumer only. */
#ifndef RINGLANE_CONSUMER_OFFSETS_H
#define RINGLANE_CONSUMER_OFFSETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct rl__offsets {
    int64_t *offset; /* ring buffer of dispatched offsets, increasing, oldest at head */
    uint8_t *done;
    uint32_t cap, head, count;
    int64_t watermark;   /* the offset to commit: everything below it has completed */
    int64_t last_pushed; /* -1 before the first push */
} rl__offsets;

/* cap: the most offsets in flight at once (1..2^24). RL_EINVAL, RL_ENOMEM. */
int rl__offsets_init(rl__offsets *o, uint32_t cap);
void rl__offsets_free(rl__offsets *o);

/* Forgets everything: after a revoke, the next assignment starts from the committed offset. */
void rl__offsets_reset(rl__offsets *o);

/* Records a dispatched offset. Offsets must increase (gaps are fine: compaction, transaction
 * markers). RL_EAGAIN when cap offsets are in flight; RL_EINVAL when not increasing. */
int rl__offsets_push(rl__offsets *o, int64_t offset);

/* Marks a dispatched offset complete and advances the watermark past every leading completed
 * offset. RL_ENOENT if the offset is not in flight (never pushed, or completed already). */
int rl__offsets_complete(rl__offsets *o, int64_t offset);

/* The offset to commit (Kafka's "next offset to consume"): the oldest offset still in flight,
 * or one past the last completed when none is; -1 before anything completed. It never passes
 * an unfinished offset. */
int64_t rl__offsets_watermark(const rl__offsets *o);

/* The oldest offset in flight, -1 when none is. */
int64_t rl__offsets_oldest(const rl__offsets *o);

/* Offsets in flight (pushed, not yet popped because something before them is unfinished or
 * they are unfinished themselves). */
uint32_t rl__offsets_in_flight(const rl__offsets *o);

/* The i-th offset in flight from the oldest (i < rl__offsets_in_flight), and whether it has
 * completed: what the offset map is made of. */
int64_t rl__offsets_at(const rl__offsets *o, uint32_t i, int *done);

#endif
