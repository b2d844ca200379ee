/* SPDX-License-Identifier: BSD-2-Clause */
/* Building immutable ring snapshots, and the membership changes that make new ones. */
#include "error_detail_internal.h"
#include "ring_internal.h"
#include "ringlane/error.h"

#include <stdlib.h>
#include <string.h>

void rl_ring_options_init(rl_ring_options *opts)
{
    if (!opts)
        return;
    opts->profile = NULL;
    opts->vnodes = RL_VNODES_PROFILE;
    opts->hash = NULL;
    opts->hash_ctx = NULL;
}

static size_t bounded_strlen(const char *s, size_t max)
{
    size_t n = 0;
    while (n <= max && s[n])
        n++;
    return n;
}

/* How a refusal names member i: "members[i]", or "member" for the one rl_ring_add appends. */
static void member_label(char *buf, size_t size, size_t i, size_t added)
{
    if (i == added)
        snprintf(buf, size, "member");
    else
        snprintf(buf, size, "members[%zu]", i);
}

void rl__member_label(const rl_ring_t *r, size_t node, char *buf, size_t size)
{
    member_label(buf, size, node, r->added);
}

int rl__check_member(const rl_member *m, size_t i, size_t added)
{
    /* Valid members are the rule: the label is made only for a refusal (an snprintf per member
     * was a quarter of a 65,536-member build). */
    if (m && m->name && m->weight >= 1 && m->weight <= RL_WEIGHT_MAX && m->name[0] &&
        bounded_strlen(m->name, RL_NAME_MAX) <= RL_NAME_MAX &&
        (!m->zone || bounded_strlen(m->zone, RL_NAME_MAX) <= RL_NAME_MAX))
        return 0;
    char label[48], q[RL__QUOTE_SIZE];
    member_label(label, sizeof label, i, added);
    if (!m)
        return rl_error_detail_set(RL_EINVAL, "%s NULL: no member to add", label);
    if (!m->name)
        return rl_error_detail_set(RL_EINVAL, "%s.name NULL: every member needs a name", label);
    size_t n = bounded_strlen(m->name, RL_NAME_MAX);
    if (n == 0 || n > RL_NAME_MAX)
        return rl_error_detail_set(RL_ENAME, "%s.name %s%s: a name must be 1..%u bytes", label,
                                   rl__quote(q, m->name), n ? " (too long)" : "", RL_NAME_MAX);
    if (m->zone && bounded_strlen(m->zone, RL_NAME_MAX) > RL_NAME_MAX)
        return rl_error_detail_set(RL_ENAME,
                                   "%s.zone %s (too long): a zone must be at most %u bytes", label,
                                   rl__quote(q, m->zone), RL_NAME_MAX);
    if (m->weight < 1 || m->weight > RL_WEIGHT_MAX)
        return rl_error_detail_set(RL_EWEIGHT, "%s.weight %u: a weight must be 1..%u", label,
                                   m->weight, RL_WEIGHT_MAX);
    return 0;
}

int rl__points_push(rl__points *pts, uint64_t pos, uint32_t node, uint32_t vnode)
{
    if (pts->len == pts->cap) {
        if (pts->cap >= RL_POINTS_MAX)
            return RL_ETOOBIG;
        size_t cap = pts->cap ? pts->cap * 2 : 1024;
        if (cap > RL_POINTS_MAX)
            cap = RL_POINTS_MAX;
        rl__point *v = realloc(pts->v, cap * sizeof *v);
        if (!v)
            return RL_ENOMEM;
        pts->v = v;
        pts->cap = cap;
    }
    pts->v[pts->len++] = (rl__point){.pos = pos, .node = node, .vnode = vnode};
    return 0;
}

uint64_t rl__label_hash(const rl_ring_t *r, const void *data, size_t len)
{
    uint64_t h = r->hash ? r->hash(r->hash_ctx, data, len) : r->profile->label_hash(data, len);
    return h & r->mask;
}

/* Adds one to the decimal number in p[0..len) in place; returns its new length. */
static size_t decimal_increment(char *p, size_t len)
{
    for (size_t k = len; k-- > 0;) {
        if (p[k] != '9') {
            p[k]++;
            return len;
        }
        p[k] = '0';
    }
    memmove(p + 1, p, len); /* 9...9 became 0...0: one digit more */
    p[0] = '1';
    return len + 1;
}

/* Generic labels "<name><sep><i>" for i in 0 .. weight * vnodes - 1, one point each. The
 * "<name><sep>" prefix is written once per member and i is counted in place in decimal. */
static int emit_generic(const rl_ring_t *r, rl__points *out)
{
    char label[RL_NAME_MAX + 32];
    size_t sep_len = strlen(r->profile->label_sep);
    for (uint32_t n = 0; n < r->n_nodes; n++) {
        const rl__node *node = &r->nodes[n];
        memcpy(label, node->name, node->name_len);
        memcpy(label + node->name_len, r->profile->label_sep, sep_len);
        size_t prefix = node->name_len + sep_len, digits = 1;
        label[prefix] = '0';
        uint64_t count = (uint64_t)node->weight * r->vnodes;
        for (uint64_t i = 0; i < count; i++) {
            if (i > 0)
                digits = decimal_increment(label + prefix, digits);
            int rc =
                rl__points_push(out, rl__label_hash(r, label, prefix + digits), n, (uint32_t)i);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int cmp_str_ptr(const void *pa, const void *pb)
{
    return strcmp(*(char *const *)pa, *(char *const *)pb);
}

/* A name and its node index, so names sort without global state (builds run on any thread). */
typedef struct named_index {
    const char *name;
    uint32_t node;
} named_index;

static int cmp_named_index(const void *pa, const void *pb)
{
    return strcmp(((const named_index *)pa)->name, ((const named_index *)pb)->name);
}

/* Sorts node indices by name (for rl_ring_find and ties), rejecting duplicates. */
static int index_names(rl_ring_t *r)
{
    size_t n = r->n_nodes ? r->n_nodes : 1;
    named_index *sorted = malloc(n * sizeof *sorted);
    r->by_name = malloc(n * sizeof *r->by_name);
    if (!sorted || !r->by_name) {
        free(sorted);
        return RL_ENOMEM;
    }
    for (uint32_t i = 0; i < r->n_nodes; i++)
        sorted[i] = (named_index){r->nodes[i].name, i};
    qsort(sorted, r->n_nodes, sizeof *sorted, cmp_named_index);
    int rc = 0;
    for (size_t i = 0; i < r->n_nodes; i++) {
        if (rc == 0 && i > 0 && strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
            /* Named by the later of the two; the other by its index alone, so that a layer
             * that renames "members[i]" (the dispatcher's lanes[i]) needs to look only at the
             * start. */
            uint32_t a = sorted[i - 1].node, b = sorted[i].node;
            char later[48], q[RL__QUOTE_SIZE];
            rl__member_label(r, a < b ? b : a, later, sizeof later);
            rc = rl_error_detail_set(RL_EDUPNAME,
                                     "%s.name %s: a name must be unique (also at index %u)", later,
                                     rl__quote(q, sorted[i].name), a < b ? a : b);
        }
        r->by_name[i] = sorted[i].node;
    }
    free(sorted);
    return rc;
}

/* The name index of a ring made from `from` by one change, from from's own: one name put in
 * or taken out, in place of a sort of every name. rl_ring_add has checked that an added name is
 * new, so no duplicate can arise. */
static int index_names_from(rl_ring_t *r, const rl_ring_t *from, const rl__change *change)
{
    size_t n = r->n_nodes ? r->n_nodes : 1;
    r->by_name = malloc(n * sizeof *r->by_name);
    if (!r->by_name)
        return RL_ENOMEM;
    const uint32_t *old = from->by_name;
    size_t on = from->n_nodes;
    if (change->kind == RL__CHANGE_ADD) {
        const char *name = r->nodes[change->node].name;
        size_t lo = 0, hi = on;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(from->nodes[old[mid]].name, name) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        memcpy(r->by_name, old, lo * sizeof *old);
        r->by_name[lo] = change->node;
        memcpy(r->by_name + lo + 1, old + lo, (on - lo) * sizeof *old);
    } else if (change->kind == RL__CHANGE_REMOVE) {
        size_t k = 0;
        for (size_t i = 0; i < on; i++)
            if (old[i] != change->node)
                r->by_name[k++] = old[i] > change->node ? old[i] - 1 : old[i];
    } else {
        memcpy(r->by_name, old, on * sizeof *old);
    }
    return 0;
}

/* Dense zone ids: 0 for "no zone", then one per distinct zone name (in name order). */
static int index_zones(rl_ring_t *r)
{
    char **zones = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *zones);
    if (!zones)
        return RL_ENOMEM;
    size_t nz = 0;
    for (size_t i = 0; i < r->n_nodes; i++)
        if (r->nodes[i].zone)
            zones[nz++] = r->nodes[i].zone;
    qsort(zones, nz, sizeof *zones, cmp_str_ptr);
    size_t distinct = 0;
    for (size_t i = 0; i < nz; i++)
        if (distinct == 0 || strcmp(zones[distinct - 1], zones[i]) != 0)
            zones[distinct++] = zones[i];
    for (size_t i = 0; i < r->n_nodes; i++) {
        r->nodes[i].zone_id = 0;
        if (!r->nodes[i].zone)
            continue;
        size_t lo = 0, hi = distinct;
        while (lo < hi) { /* the zone is present, so this finds it */
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(zones[mid], r->nodes[i].zone) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        r->nodes[i].zone_id = (uint32_t)lo + 1;
    }
    r->n_zones = (uint32_t)distinct + 1;
    free(zones);
    return 0;
}

/* The points the profile will emit: its own count, else weight * vnodes per member. */
static int count_points(const rl_ring_t *r, uint64_t *points)
{
    if (r->profile->count)
        return r->profile->count(r, points);
    uint64_t total = 0;
    for (size_t n = 0; n < r->n_nodes; n++)
        total += (uint64_t)r->nodes[n].weight * r->vnodes;
    *points = total;
    return 0;
}

static int place_points(rl_ring_t *r)
{
    /* Counted before anything is allocated for them: too many is RL_ETOOBIG at once, not after
     * hundreds of MiB; then the array is allocated once, at its size. */
    uint64_t count;
    int rc = count_points(r, &count);
    if (rc)
        return rc;
    if (count > RL_POINTS_MAX)
        return rl_error_detail_set(RL_ETOOBIG,
                                   "vnodes %u with %zu members: profile %s makes %llu points, over "
                                   "RL_POINTS_MAX (%u)",
                                   r->vnodes, r->n_nodes, r->profile->info.name,
                                   (unsigned long long)count, RL_POINTS_MAX);
    rl__points pts = {0};
    if (count > 0) {
        pts.v = malloc((size_t)count * sizeof *pts.v);
        if (!pts.v)
            return RL_ENOMEM;
        pts.cap = (size_t)count;
    }
    rc = r->profile->emit ? r->profile->emit(r, &pts) : emit_generic(r, &pts);
    /* The tie key of each node: the profile's order of members at one position. */
    uint32_t *tie = malloc((r->n_nodes ? r->n_nodes : 1) * sizeof *tie);
    r->pos = malloc((pts.len ? pts.len : 1) * sizeof *r->pos);
    r->owner = malloc((pts.len ? pts.len : 1) * sizeof *r->owner);
    if (rc == 0 && (!tie || !r->pos || !r->owner))
        rc = RL_ENOMEM;
    if (rc == 0) {
        for (uint32_t i = 0; i < r->n_nodes; i++) {
            if (r->profile->tie == RL__TIE_NAME)
                tie[r->by_name[i]] = i;
            else if (r->profile->tie == RL__TIE_LATER_WINS)
                tie[i] = UINT32_MAX - i;
            else
                tie[i] = i;
        }
        rc = rl__sort_points(pts.v, pts.len, tie);
    }
    if (rc == 0) {
        for (size_t i = 0; i < pts.len; i++) {
            r->pos[i] = pts.v[i].pos;
            r->owner[i] = pts.v[i].node;
        }
        r->n_points = pts.len;
    }
    free(tie);
    free(pts.v);
    return rc;
}

void rl_ring_free(rl_ring_t *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_nodes; i++) {
        free(r->nodes[i].name);
        free(r->nodes[i].zone);
    }
    free(r->nodes);
    free(r->by_name);
    free(r->pos);
    free(r->owner);
    free(r->table);
    free(r->memento);
    rl__index_free(r);
    free(r);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* A refusal by the profile's own code (count, emit, build), said in words when the profile
 * said nothing itself. */
static int profile_refusal(const rl_ring_t *r, int rc)
{
    const char *name = r->profile->info.name;
    if (rc == 0 || rl_last_error_detail()[0])
        return rc;
    if (rc == RL_ENOMEM)
        return rl_error_detail_set(rc, "out of memory: a ring of %zu members (profile %s)",
                                   r->n_nodes, name);
    if (rc == RL_ENOTSUP && r->hash)
        return rl_error_detail_set(rc, "hash set: profile %s takes no caller hash", name);
    if (rc == RL_EWEIGHT) {
        for (size_t n = 0; n < r->n_nodes; n++) {
            if (r->nodes[n].weight == 1)
                continue;
            char label[48];
            rl__member_label(r, n, label, sizeof label);
            return rl_error_detail_set(rc, "%s.weight %u: profile %s takes weight 1 only", label,
                                       r->nodes[n].weight, name);
        }
    }
    if (rc == RL_ETOOBIG)
        return rl_error_detail_set(rc,
                                   "vnodes %u with %zu members: profile %s would make more than "
                                   "RL_POINTS_MAX (%u) points",
                                   r->vnodes, r->n_nodes, name, RL_POINTS_MAX);
    return rl_error_detail_set(rc, "profile %s refused these %zu members: %s", name, r->n_nodes,
                               rl_strerror(rc));
}

/* rl_ring_build, with `added` the index of the member rl_ring_add appends (SIZE_MAX: none),
 * for the words of a refusal. */
/* `from` and `change`: the ring this one is made from by one change (its name index is then
 * patched, not sorted again), or NULL. */
static int build(const rl_member *members, size_t count, const rl_ring_options *opts, size_t added,
                 const rl_ring_t *from, const rl__change *change, rl_ring_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the ring");
    *out = NULL;
    if (!members && count)
        return rl_error_detail_set(RL_EINVAL,
                                   "members NULL with count %zu: no members means count 0", count);

    rl_ring_options defaults;
    rl_ring_options_init(&defaults);
    if (!opts)
        opts = &defaults;
    const rl__profile *profile = rl__profile_find(opts->profile);
    if (!profile) {
        char q[RL__QUOTE_SIZE], names[256];
        rl_profile_names(names, sizeof names);
        return rl_error_detail_set(RL_EPROFILE, "profile %s: unknown profile (one of: %s)",
                                   rl__quote(q, opts->profile), names);
    }
    /* One rule for profile and vnodes, the partitioner's and the CLI's too. */
    char why[160];
    int vrc = rl_profile_explain_vnodes(profile->info.name, opts->vnodes, why, sizeof why);
    if (vrc)
        return rl_error_detail_set(vrc, "vnodes %u: %s", opts->vnodes, why);
    uint32_t vnodes =
        opts->vnodes == RL_VNODES_PROFILE ? profile->info.default_vnodes : opts->vnodes;
    if (count > RL_MEMBERS_MAX)
        return rl_error_detail_set(RL_ETOOBIG, "count %zu: over RL_MEMBERS_MAX (%u) members", count,
                                   RL_MEMBERS_MAX);

    uint64_t total = 0, weight = 0;
    for (size_t i = 0; i < count; i++) {
        int rc = rl__check_member(&members[i], i, added);
        if (rc)
            return rc;
        weight += members[i].weight;
    }
    total = weight * vnodes;
    /* Profiles that count their points another way are checked once their members are known
     * (place_points), still before the points are allocated. */
    if (!profile->count && !profile->lookup_hash && total > RL_POINTS_MAX)
        return rl_error_detail_set(RL_ETOOBIG,
                                   "vnodes %u with %zu members of total weight %llu: %llu points, "
                                   "over RL_POINTS_MAX (%u)",
                                   vnodes, count, (unsigned long long)weight,
                                   (unsigned long long)total, RL_POINTS_MAX);

    rl_ring_t *r = calloc(1, sizeof *r);
    if (!r)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: a ring of %zu members", count);
    r->profile = profile;
    r->vnodes = vnodes;
    r->added = added;
    r->hash = opts->hash;
    r->hash_ctx = opts->hash_ctx;
    r->mask = profile->info.bits == 64 ? UINT64_MAX : (UINT64_C(1) << profile->info.bits) - 1;
    r->nodes = calloc(count ? count : 1, sizeof *r->nodes);
    if (!r->nodes) {
        free(r);
        return rl_error_detail_set(RL_ENOMEM, "out of memory: a ring of %zu members", count);
    }
    r->n_nodes = count;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        rl__node *n = &r->nodes[i];
        n->name = dup_str(members[i].name);
        n->name_len = n->name ? (uint32_t)strlen(n->name) : 0;
        n->weight = members[i].weight;
        if (members[i].zone && members[i].zone[0])
            n->zone = dup_str(members[i].zone);
        if (!n->name || (members[i].zone && members[i].zone[0] && !n->zone))
            rc = RL_ENOMEM;
    }
    if (rc == 0)
        rc = from ? index_names_from(r, from, change) : index_names(r);
    if (rc == 0)
        rc = index_zones(r);
    if (rc == 0 && profile->lookup_hash)
        rc = profile->build ? profile->build(r) : 0; /* no points: a table or a computation */
    else if (rc == 0)
        rc = place_points(r);
    if (rc == 0)
        rc = rl__index_build(r);
    if (rc) {
        profile_refusal(r, rc);
        rl_ring_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int rl_ring_build(const rl_member *members, size_t count, const rl_ring_options *opts,
                  rl_ring_t **out)
{
    return build(members, count, opts, SIZE_MAX, NULL, NULL, out);
}

/* The members of r as an rl_member array, with room for one more at the end. */
static rl_member *members_of(const rl_ring_t *r)
{
    rl_member *m = malloc((r->n_nodes + 1) * sizeof *m);
    if (!m)
        return NULL;
    for (size_t i = 0; i < r->n_nodes; i++)
        m[i] = (rl_member){r->nodes[i].name, r->nodes[i].weight, r->nodes[i].zone};
    return m;
}

/* The ring of the members m, built as rl_ring_build does (`added`: the index of the member
 * rl_ring_add appends, for the detail's words); a profile with a history (follow) then carries
 * r's over and applies the change. */
static int rebuild(const rl_ring_t *r, const rl_member *m, size_t count, size_t added,
                   rl__change change, rl_ring_t **out)
{
    /* A profile without vnodes (jump) takes none given, not even its 0. */
    rl_ring_options opts = {.profile = r->profile->info.name,
                            .vnodes = r->profile->info.max_vnodes ? r->vnodes : RL_VNODES_PROFILE,
                            .hash = r->hash,
                            .hash_ctx = r->hash_ctx};
    int rc = build(m, count, &opts, added, r, &change, out);
    if (rc == 0 && r->profile->follow) {
        rc = r->profile->follow(*out, r, &change);
        if (rc) {
            rl_ring_free(*out);
            *out = NULL;
        }
    }
    return rc;
}

int rl_ring_add(const rl_ring_t *r, const rl_member *member, rl_ring_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the new ring");
    *out = NULL;
    if (!r)
        return rl_error_detail_set(RL_EINVAL, "ring NULL: no ring to add to");
    int rc = rl__check_member(member, 0, 0);
    if (rc)
        return rc;
    rl_member *m = members_of(r);
    if (!m)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: a ring of %zu members",
                                   r->n_nodes + 1);
    uint32_t existing;
    size_t count = r->n_nodes;
    rl__change change = {RL__CHANGE_NONE, 0};
    if (rl_ring_find(r, member->name, &existing) != 0) {
        change = (rl__change){RL__CHANGE_ADD, (uint32_t)count};
        m[count++] = *member;
    }
    rc = rebuild(r, m, count, r->n_nodes, change, out);
    free(m);
    return rc;
}

int rl_ring_remove(const rl_ring_t *r, const char *name, rl_ring_t **out)
{
    rl_error_detail_clear();
    if (!out)
        return rl_error_detail_set(RL_EINVAL, "out NULL: nowhere to put the new ring");
    *out = NULL;
    if (!r)
        return rl_error_detail_set(RL_EINVAL, "ring NULL: no ring to remove from");
    if (!name)
        return rl_error_detail_set(RL_EINVAL, "name NULL: no member to remove");
    rl_member *m = members_of(r);
    if (!m)
        return rl_error_detail_set(RL_ENOMEM, "out of memory: a ring of %zu members", r->n_nodes);
    uint32_t gone;
    size_t count = r->n_nodes;
    rl__change change = {RL__CHANGE_NONE, 0};
    if (rl_ring_find(r, name, &gone) == 0) {
        change = (rl__change){RL__CHANGE_REMOVE, gone};
        memmove(&m[gone], &m[gone + 1], (count - gone - 1) * sizeof *m);
        count--;
    }
    int rc = rebuild(r, m, count, SIZE_MAX, change, out);
    free(m);
    return rc;
}

size_t rl_ring_member_count(const rl_ring_t *r)
{
    return r ? r->n_nodes : 0;
}

size_t rl_ring_point_count(const rl_ring_t *r)
{
    return r ? r->n_points : 0;
}

const char *rl_ring_profile(const rl_ring_t *r)
{
    return r ? r->profile->info.name : NULL;
}

uint32_t rl_ring_vnodes(const rl_ring_t *r)
{
    return r ? r->vnodes : 0;
}

unsigned rl_ring_hash_bits(const rl_ring_t *r)
{
    return r ? r->profile->info.bits : 0;
}

int rl_ring_member(const rl_ring_t *r, uint32_t node, rl_member *out)
{
    if (!r || !out)
        return RL_EINVAL;
    if (node >= r->n_nodes)
        return RL_ERANGE;
    const rl__node *n = &r->nodes[node];
    *out = (rl_member){n->name, n->weight, n->zone};
    return 0;
}

const char *rl_ring_node_name(const rl_ring_t *r, uint32_t node)
{
    return r && node < r->n_nodes ? r->nodes[node].name : NULL;
}

int rl_ring_find(const rl_ring_t *r, const char *name, uint32_t *node)
{
    if (!r || !name || !node)
        return RL_EINVAL;
    size_t lo = 0, hi = r->n_nodes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->nodes[r->by_name[mid]].name, name);
        if (c == 0) {
            *node = r->by_name[mid];
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return RL_ENOENT;
}

int rl_ring_point(const rl_ring_t *r, size_t i, uint64_t *position, uint32_t *node)
{
    if (!r)
        return RL_EINVAL;
    if (r->profile->lookup_hash)
        return RL_ENOTSUP;
    if (i >= r->n_points)
        return RL_ERANGE;
    if (position)
        *position = r->pos[i];
    if (node)
        *node = r->owner[i];
    return 0;
}
