/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth record: one line of text per growth of a topic, kept in the compacted topic
 * __ringlane_growth under the key "<topic>/<P>-><P'>" (docs/partition_growth.md, "The growth
 * record"). Pure functions (no librdkafka): the ringlane tool writes and reads records, the
 * consumer's fence reads them, the fuzz target checks the parser. Not installed. */
#ifndef RINGLANE_PARTITIONER_GROWTH_RECORD_H
#define RINGLANE_PARTITIONER_GROWTH_RECORD_H

#include <stddef.h>
#include <stdint.h>

#define RL__GROWTH_TOPIC "__ringlane_growth" /* where the records live */
#define RL__GROWTH_MAGIC "ringlane-growth"   /* a value's first word */
#define RL__GROWTH_VERSION 1
#define RL__GROWTH_PARTITIONS_MAX 100000u /* the largest `to` (the CLI's --partitions bound) */
#define RL__GROWTH_TOPIC_MAX 249u         /* Kafka's longest topic name */
#define RL__GROWTH_PROBES 4096u           /* probe keys a ring fingerprint routes */
/* The longest key: a topic, "/", from (5 digits at most), "->" and to (6). */
#define RL__GROWTH_KEY_MAX (RL__GROWTH_TOPIC_MAX + 1 + 5 + 2 + 6)

typedef enum rl__growth_state {
    RL__GROWTH_ANNOUNCED = 0, /* begun: the new partitions' messages are held */
    RL__GROWTH_SEALED = 1,    /* points written: held until the old partition passes them */
    RL__GROWTH_ABORTED = 2    /* did not happen: nothing is held */
} rl__growth_state;

/* A record. `profile` points at the profile's own name (rl_profile_find), never freed; `points`
 * holds `from` offsets when sealed (malloc'd, rl__growth_record_free), else NULL. */
typedef struct rl__growth_record {
    char topic[RL__GROWTH_TOPIC_MAX + 1];
    uint32_t from, to;
    const char *profile;
    uint32_t vnodes; /* the ring's vnodes per partition; 0 for profiles without (jump, memento) */
    uint64_t ring_from, ring_to; /* fingerprints of the rings over from and over to */
    uint64_t nonce;
    rl__growth_state state;
    int64_t *points;
} rl__growth_record;

/* Why a value was not read as a record. */
enum rl__growth_verdict {
    RL__GROWTH_OK = 0,
    RL__GROWTH_FOREIGN = 1,       /* not a growth record (its first word is not ours) */
    RL__GROWTH_OTHER_VERSION = 2, /* a growth record of another version */
    RL__GROWTH_CORRUPT = 3,       /* malformed: *why names the field and what is wrong */
    RL__GROWTH_NOMEM = 4
};

/* "announced", "sealed", "aborted" (NULL for anything else). */
const char *rl__growth_state_name(rl__growth_state s);

/* Whether `name` is a topic name Kafka takes: 1..249 of a-z A-Z 0-9 . _ - */
int rl__growth_topic_valid(const char *name, size_t len);

/* Writes the key "<topic>/<from>-><to>" into buf (terminated). Returns its length, or -1 for
 * an invalid topic or counts, or a buffer too small. */
int rl__growth_key_format(const char *topic, uint32_t from, uint32_t to, char *buf, size_t size);

/* Reads a key. Returns RL__GROWTH_OK or RL__GROWTH_CORRUPT with *why set (a static string). */
int rl__growth_key_parse(const char *key, size_t len, char topic[RL__GROWTH_TOPIC_MAX + 1],
                         uint32_t *from, uint32_t *to, const char **why);

/* The value of a record, malloc'd and terminated (no newline), or NULL (with *why) when the
 * record is not one the parser would accept, or out of memory. */
char *rl__growth_value_format(const rl__growth_record *r, const char **why);

/* Reads a value: every field in order, nothing else (docs/partition_growth.md). On success *out
 * is filled (free it with rl__growth_record_free); otherwise *out is zeroed and *why, a static
 * string, says what is wrong. */
int rl__growth_value_parse(const char *text, size_t len, rl__growth_record *out, const char **why);

/* Whether a record belongs under this key (same topic and counts): 1 or 0. */
int rl__growth_record_matches_key(const rl__growth_record *r, const char *key, size_t len);

void rl__growth_record_free(rl__growth_record *r);

/* The vnodes a record names for the profile and a --vnodes value (RL_VNODES_PROFILE: the
 * profile's default, 0 for profiles that have none). */
uint32_t rl__growth_record_vnodes(const char *profile, uint32_t vnodes);

/* The fingerprint of the ring the partitioner builds over `partitions` partitions (members "0"
 * .. "n-1", weight 1) with this profile and vnodes (as in a record: 0 for none): the XXH3 of
 * the partitions it gives RL__GROWTH_PROBES fixed keys, each as 4 bytes little-endian. Returns
 * 0 or the ring's RL_E* error. */
int rl__growth_ring_fingerprint(const char *profile, uint32_t vnodes, uint32_t partitions,
                                uint64_t *out);

#endif
