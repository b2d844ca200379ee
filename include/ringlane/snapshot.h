/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: a published-snapshot holder.
 *
 * One current ring that any number of threads look up in while writers publish new ones.
 * Readers never lock, never allocate and never wait for a writer. A replaced ring is freed
 * only when no reader can still use it: at once if none holds it, else by the last release.
 *
 *     rl_snapshot_t *h;
 *     rl_snapshot_create(ring, &h);           // h owns ring
 *     rl_snapshot_lookup(h, key, len, &node); // any thread: one lookup in the current ring
 *     const rl_ring_t *r;                     // or hold a ring for a batch of lookups:
 *     rl_snapshot_acquire(h, &r); ... rl_ring_lookup(r, ...) ... rl_snapshot_release(r);
 *     rl_snapshot_publish(h, next);           // writer: h owns next; the old ring retires
 *     rl_snapshot_free(h);
 *
 * How: each published ring carries a reference count (the holder's reference plus one per
 * acquire). Loading the current pointer and then counting a reference is the classic race (the
 * writer could free the ring in between), so that short window is guarded by a grace period:
 * a reader announces itself in one of two counters chosen by the parity of a publish epoch,
 * spread over cache-line shards so reader threads do not contend; a publish swaps the pointer,
 * flips the epoch and waits until the old parity's counters drain, which takes only as long as
 * the few instructions of windows already begun. No thread has to register, and a reader that
 * holds a ring for long never delays a publish.
 */
#ifndef RINGLANE_SNAPSHOT_H
#define RINGLANE_SNAPSHOT_H

#include "ringlane/common.h"
#include "ringlane/ring.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_snapshot rl_snapshot_t;

/* A holder whose first snapshot is `ring` (NULL: none yet; lookups say RL_EEMPTY). The holder
 * owns the ring from now on. Errors: RL_EINVAL (NULL out), RL_EBUSY (ring already in a holder),
 * RL_ENOMEM (then the caller still owns ring); *out is NULL then, and rl_last_error_detail()
 * says why ("ring: already in a holder ..."). */
RL_EXTERN int rl_snapshot_create(rl_ring_t *ring, rl_snapshot_t **out);

/* Makes `ring` the current snapshot; the holder owns it from now on. The replaced ring is freed
 * once no reader holds it. Returns when no new reader can get the replaced ring (it waits only
 * for lookups already under way, never for held rings). Publishes from several threads are
 * serialized. Errors: RL_EINVAL (NULL), RL_EBUSY (ring already in a holder). */
RL_EXTERN int rl_snapshot_publish(rl_snapshot_t *h, rl_ring_t *ring);

/* The current snapshot, held until rl_snapshot_release(): it stays valid and unchanged while
 * later rings are published. Lock-free, allocates nothing. RL_EINVAL, RL_EEMPTY (none). */
RL_EXTERN int rl_snapshot_acquire(rl_snapshot_t *h, const rl_ring_t **out);

/* Gives back a ring from rl_snapshot_acquire(); the last holder of a replaced ring frees it.
 * NULL is a no-op. */
RL_EXTERN void rl_snapshot_release(const rl_ring_t *ring);

/* rl_ring_lookup / rl_ring_lookup_hash in the current snapshot, without taking a reference:
 * the cheapest way to route one key. The node index is the answering snapshot's. */
RL_EXTERN int rl_snapshot_lookup(rl_snapshot_t *h, const void *key, size_t len, uint32_t *node);
RL_EXTERN int rl_snapshot_lookup_hash(rl_snapshot_t *h, uint64_t hash, uint32_t *node);

/* Frees the holder and drops its reference to the current ring (rings still held by readers
 * live until released). No thread may be inside a call on h when it is freed. NULL: no-op. */
RL_EXTERN void rl_snapshot_free(rl_snapshot_t *h);

#ifdef __cplusplus
}
#endif
#endif
