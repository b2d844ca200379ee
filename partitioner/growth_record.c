/* SPDX-License-Identifier: BSD-2-Clause */
/* The growth record's codec (growth_record.h). The format is strict on purpose: a consumer
 * holds or releases messages by what it reads here, so anything that is not exactly a record
 * this version writes is refused, with the field that is wrong. */
#include "growth_record.h"

#include "ringlane/hash.h"
#include "ringlane/profile.h"
#include "ringlane/ring.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {"announced", "sealed", "aborted"};

const char *rl__growth_state_name(rl__growth_state s)
{
    return (unsigned)s < 3 ? state_names[s] : NULL;
}

int rl__growth_topic_valid(const char *name, size_t len)
{
    if (!name || len == 0 || len > RL__GROWTH_TOPIC_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int counts_valid(uint32_t from, uint32_t to)
{
    return from >= 1 && from < to && to <= RL__GROWTH_PARTITIONS_MAX;
}

int rl__growth_key_format(const char *topic, uint32_t from, uint32_t to, char *buf, size_t size)
{
    if (!topic || !buf || !rl__growth_topic_valid(topic, strlen(topic)) || !counts_valid(from, to))
        return -1;
    int n = snprintf(buf, size, "%s/%" PRIu32 "->%" PRIu32, topic, from, to);
    return n < 0 || (size_t)n >= size ? -1 : n;
}

/* A cursor over a text of known length (it may hold NUL bytes: they are refused). */
typedef struct cursor {
    const char *at, *end;
} cursor;

static int take(cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->at) < n || memcmp(c->at, word, n) != 0)
        return 0;
    c->at += n;
    return 1;
}

/* A decimal number 0..max: no sign, no leading zero, at least one digit. */
static int take_u64(cursor *c, uint64_t max, uint64_t *out)
{
    const char *p = c->at;
    uint64_t v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p - '0');
        if (v > (max - d) / 10)
            return 0;
        v = v * 10 + d;
        p++;
    }
    if (p == c->at || (*c->at == '0' && p - c->at > 1))
        return 0;
    c->at = p;
    *out = v;
    return 1;
}

/* 16 lowercase hex digits. */
static int take_hex64(cursor *c, uint64_t *out)
{
    if (c->end - c->at < 16)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char ch = c->at[i];
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else
            return 0;
        v = v << 4 | d;
    }
    c->at += 16;
    *out = v;
    return 1;
}

/* The characters up to the next space or the end. */
static size_t word_len(const cursor *c)
{
    const char *p = c->at;
    while (p < c->end && *p != ' ')
        p++;
    return (size_t)(p - c->at);
}

int rl__growth_key_parse(const char *key, size_t len, char topic[RL__GROWTH_TOPIC_MAX + 1],
                         uint32_t *from, uint32_t *to, const char **why)
{
    const char *ignored; /* a local: the parser runs on several threads at once */
    if (!why)
        why = &ignored;
    if (!key || !topic || !from || !to)
        return *why = "no key", RL__GROWTH_CORRUPT;
    const char *slash = memchr(key, '/', len);
    if (!slash || !rl__growth_topic_valid(key, (size_t)(slash - key)))
        return *why = "a key is <topic>/<from>-><to> with a valid topic name", RL__GROWTH_CORRUPT;
    cursor c = {slash + 1, key + len};
    uint64_t f, t;
    if (!take_u64(&c, RL__GROWTH_PARTITIONS_MAX, &f) || !take(&c, "->") ||
        !take_u64(&c, RL__GROWTH_PARTITIONS_MAX, &t) || c.at != c.end)
        return *why = "a key is <topic>/<from>-><to> with decimal counts", RL__GROWTH_CORRUPT;
    if (!counts_valid((uint32_t)f, (uint32_t)t))
        return *why = "a key's counts must be 1 <= from < to <= 100000", RL__GROWTH_CORRUPT;
    memcpy(topic, key, (size_t)(slash - key));
    topic[slash - key] = 0;
    *from = (uint32_t)f;
    *to = (uint32_t)t;
    return *why = "", RL__GROWTH_OK;
}

/* The profile rule shared by the writer and the reader. Returns NULL or why not. */
static const char *profile_why(const rl_profile_info *p, uint32_t vnodes)
{
    if (!p)
        return "profile: not a profile this ringlane knows";
    if (!p->local_add)
        return "profile: has no local_add (a growth would move keys between old partitions)";
    if (p->default_vnodes == 0)
        return vnodes == 0 ? NULL : "vnodes: this profile has none, so it must be 0";
    if (vnodes == 0 || rl_profile_check_vnodes(p->name, vnodes) != 0)
        return "vnodes: outside the profile's range";
    return NULL;
}

static const char *record_why(const rl__growth_record *r)
{
    const char *nul = memchr(r->topic, 0, sizeof r->topic);
    if (!nul || !rl__growth_topic_valid(r->topic, (size_t)(nul - r->topic)))
        return "topic: 1..249 of a-z A-Z 0-9 . _ -";
    if (!counts_valid(r->from, r->to))
        return "from, to: 1 <= from < to <= 100000";
    const char *why = profile_why(r->profile ? rl_profile_find(r->profile) : NULL, r->vnodes);
    if (why)
        return why;
    if (!rl__growth_state_name(r->state))
        return "state: announced, sealed or aborted";
    if ((r->state == RL__GROWTH_SEALED) != (r->points != NULL))
        return "points: present exactly when sealed";
    if (r->points)
        for (uint32_t i = 0; i < r->from; i++)
            if (r->points[i] < 0)
                return "points: offsets are 0 or more";
    return NULL;
}

char *rl__growth_value_format(const rl__growth_record *r, const char **why)
{
    const char *ignored; /* a local: the parser runs on several threads at once */
    if (!why)
        why = &ignored;
    if (!r)
        return *why = "no record", NULL;
    if ((*why = record_why(r)) != NULL)
        return NULL;
    size_t cap = 512 + strlen(r->topic) + (r->points ? (size_t)r->from * 21 : 0);
    char *out = malloc(cap);
    if (!out)
        return *why = "out of memory", NULL;
    size_t n = (size_t)snprintf(
        out, cap,
        RL__GROWTH_MAGIC " %d topic=%s from=%" PRIu32 " to=%" PRIu32 " profile=%s vnodes=%" PRIu32
                         " ring=%016" PRIx64 ",%016" PRIx64 " nonce=%016" PRIx64 " state=%s",
        RL__GROWTH_VERSION, r->topic, r->from, r->to, rl_profile_find(r->profile)->name, r->vnodes,
        r->ring_from, r->ring_to, r->nonce, rl__growth_state_name(r->state));
    if (r->points) {
        n += (size_t)snprintf(out + n, cap - n, " points=");
        for (uint32_t i = 0; i < r->from; i++)
            n += (size_t)snprintf(out + n, cap - n, "%s%" PRId64, i ? "," : "", r->points[i]);
    }
    *why = "";
    return out;
}

/* Parses the fields after the version. Returns NULL or why not. */
static const char *parse_fields(cursor *c, rl__growth_record *out)
{
    uint64_t v;
    if (!take(c, " topic="))
        return "expected ' topic=' after the version";
    size_t n = word_len(c);
    if (!rl__growth_topic_valid(c->at, n))
        return "topic: 1..249 of a-z A-Z 0-9 . _ -";
    memcpy(out->topic, c->at, n);
    out->topic[n] = 0;
    c->at += n;
    if (!take(c, " from="))
        return "expected ' from=' after the topic";
    if (!take_u64(c, RL__GROWTH_PARTITIONS_MAX, &v))
        return "from: a decimal count 1..100000 without sign or leading zero";
    out->from = (uint32_t)v;
    if (!take(c, " to="))
        return "expected ' to=' after from";
    if (!take_u64(c, RL__GROWTH_PARTITIONS_MAX, &v))
        return "to: a decimal count 1..100000 without sign or leading zero";
    out->to = (uint32_t)v;
    if (!counts_valid(out->from, out->to))
        return "from, to: 1 <= from < to <= 100000";
    if (!take(c, " profile="))
        return "expected ' profile=' after to";
    n = word_len(c);
    char name[64];
    if (n == 0 || n >= sizeof name)
        return "profile: not a profile this ringlane knows";
    memcpy(name, c->at, n);
    name[n] = 0;
    c->at += n;
    const rl_profile_info *p = rl_profile_find(name);
    if (!p || strcmp(p->name, name) != 0)
        return "profile: not a profile this ringlane knows";
    out->profile = p->name;
    if (!take(c, " vnodes="))
        return "expected ' vnodes=' after the profile";
    if (!take_u64(c, UINT32_MAX - 1, &v))
        return "vnodes: a decimal number without sign or leading zero";
    out->vnodes = (uint32_t)v;
    const char *why = profile_why(p, out->vnodes);
    if (why)
        return why;
    if (!take(c, " ring="))
        return "expected ' ring=' after vnodes";
    if (!take_hex64(c, &out->ring_from) || !take(c, ",") || !take_hex64(c, &out->ring_to))
        return "ring: two fingerprints of 16 lowercase hex digits, separated by ','";
    if (!take(c, " nonce="))
        return "expected ' nonce=' after ring";
    if (!take_hex64(c, &out->nonce))
        return "nonce: 16 lowercase hex digits";
    if (!take(c, " state="))
        return "expected ' state=' after the nonce";
    n = word_len(c);
    int state = -1;
    for (int s = 0; s < 3; s++)
        if (strlen(state_names[s]) == n && memcmp(c->at, state_names[s], n) == 0)
            state = s;
    if (state < 0)
        return "state: announced, sealed or aborted";
    out->state = (rl__growth_state)state;
    c->at += n;
    if (out->state != RL__GROWTH_SEALED)
        return c->at == c->end ? NULL : "nothing may follow the state unless it is sealed";
    if (!take(c, " points="))
        return "a sealed record ends with ' points=' and its offsets";
    out->points = malloc((size_t)out->from * sizeof *out->points);
    if (!out->points)
        return "out of memory";
    for (uint32_t i = 0; i < out->from; i++) {
        if (i && !take(c, ","))
            return "points: one offset per old partition (from of them), separated by ','";
        if (!take_u64(c, INT64_MAX, &v))
            return "points: decimal offsets 0..2^63-1 without sign or leading zero";
        out->points[i] = (int64_t)v;
    }
    return c->at == c->end ? NULL : "points: one offset per old partition, nothing after them";
}

int rl__growth_value_parse(const char *text, size_t len, rl__growth_record *out, const char **why)
{
    const char *ignored; /* a local: the parser runs on several threads at once */
    if (!why)
        why = &ignored;
    if (!out)
        return *why = "no record to fill", RL__GROWTH_CORRUPT;
    memset(out, 0, sizeof *out);
    if (!text)
        return *why = "no value (a tombstone)", RL__GROWTH_FOREIGN;
    cursor c = {text, text + len};
    if (!take(&c, RL__GROWTH_MAGIC " "))
        return *why = "not a ringlane growth record", RL__GROWTH_FOREIGN;
    if (memchr(text, 0, len))
        return *why = "a NUL byte in the value", RL__GROWTH_CORRUPT;
    uint64_t version;
    cursor vc = c;
    if (!take_u64(&vc, UINT32_MAX, &version) || (vc.at < vc.end && *vc.at != ' '))
        return *why = "the version after 'ringlane-growth ' is not a number", RL__GROWTH_CORRUPT;
    if (version != RL__GROWTH_VERSION)
        return *why = "a growth record of a version other than 1", RL__GROWTH_OTHER_VERSION;
    c = vc;
    const char *bad = parse_fields(&c, out);
    if (bad) {
        int nomem = strcmp(bad, "out of memory") == 0;
        rl__growth_record_free(out);
        *why = bad;
        return nomem ? RL__GROWTH_NOMEM : RL__GROWTH_CORRUPT;
    }
    *why = "";
    return RL__GROWTH_OK;
}

int rl__growth_record_matches_key(const rl__growth_record *r, const char *key, size_t len)
{
    char topic[RL__GROWTH_TOPIC_MAX + 1];
    uint32_t from, to;
    return r && rl__growth_key_parse(key, len, topic, &from, &to, NULL) == RL__GROWTH_OK &&
           strcmp(topic, r->topic) == 0 && from == r->from && to == r->to;
}

void rl__growth_record_free(rl__growth_record *r)
{
    if (!r)
        return;
    free(r->points);
    memset(r, 0, sizeof *r);
}

uint32_t rl__growth_record_vnodes(const char *profile, uint32_t vnodes)
{
    const rl_profile_info *p = rl_profile_find(profile);
    if (!p)
        return 0;
    return vnodes == RL_VNODES_PROFILE ? p->default_vnodes : vnodes;
}

int rl__growth_ring_fingerprint(const char *profile, uint32_t vnodes, uint32_t partitions,
                                uint64_t *out)
{
    if (!profile || !out || partitions == 0 || partitions > RL__GROWTH_PARTITIONS_MAX)
        return RL_EINVAL;
    rl_member *members = calloc(partitions, sizeof *members);
    char *names = malloc((size_t)partitions * 8);
    unsigned char *routes = malloc(RL__GROWTH_PROBES * 4);
    int rc = RL_ENOMEM;
    rl_ring_t *ring = NULL;
    if (!members || !names || !routes)
        goto done;
    for (uint32_t i = 0; i < partitions; i++) {
        snprintf(names + (size_t)i * 8, 8, "%" PRIu32, i);
        members[i] = (rl_member){names + (size_t)i * 8, 1, NULL};
    }
    rl_ring_options o;
    rl_ring_options_init(&o);
    o.profile = profile;
    o.vnodes = vnodes == 0 ? RL_VNODES_PROFILE : vnodes;
    if ((rc = rl_ring_build(members, partitions, &o, &ring)) != 0)
        goto done;
    for (uint32_t i = 0; i < RL__GROWTH_PROBES; i++) {
        /* Four hex digits first, spread over 0000..fff0: turnstone places a key by them. */
        char key[48];
        int n = snprintf(key, sizeof key, "%04" PRIx32 "/ringlane-growth-probe", i * 16);
        uint32_t node;
        if ((rc = rl_ring_lookup(ring, key, (size_t)n, &node)) != 0)
            goto done;
        for (int b = 0; b < 4; b++)
            routes[i * 4 + (uint32_t)b] = (unsigned char)(node >> (8 * b));
    }
    *out = rl_xxh3(routes, RL__GROWTH_PROBES * 4);
    rc = 0;
done:
    rl_ring_free(ring);
    free(members);
    free(names);
    free(routes);
    return rc;
}
