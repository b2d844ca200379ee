/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane diff: which keys move, and between which nodes, when membership changes; each
 * node's share of the keys before and after, beside its ideal share. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: ringlane diff [--profile P] [--vnodes V]\n"
    "         (--from SPEC --to SPEC | --partitions N..M) [--json]\n"
    "       ringlane diff --profile all|P1,P2,...\n"
    "         (--from SPEC --to SPEC | --partitions N..M) [--json]\n"
    "\n"
    "Reads keys from stdin, one per line, routes each on the ring of --from and on\n"
    "the ring of --to (same profile and vnodes), and prints\n"
    "  moved <m> of <k>\n"
    "then one <old><TAB><new><TAB><count> row per pair of nodes keys moved between,\n"
    "most keys first (ties by old, then new name), an empty line, and the shares:\n"
    "  node<TAB>before<TAB>after<TAB>ideal\n"
    "  <node><TAB><share before><TAB><share after><TAB><ideal share>\n"
    "one row per node of --from, then the new nodes of --to: its share of the keys\n"
    "on each ring, and its weight over the total weight of --to (0 for a node --to\n"
    "leaves out). SPEC is NAME[=WEIGHT],...\n"
    "  --partitions N..M  compare N partitions with M (the nodes 0..N-1 and\n"
    "                     0..M-1), under the Kafka partitioner's profile balanced\n"
    "                     unless --profile says otherwise\n"
    "  --profile all|P1,P2,...\n"
    "                     each profile with its default vnodes; one line\n"
    "                     <profile><TAB>moved <m> of <k> per profile, in the order\n"
    "                     given. A profile that cannot build these rings (jump,\n"
    "                     balanced or memento with weights) or route every key\n"
    "                     (turnstone: non-hex keys) is left out, with one line on\n"
    "                     stderr saying why\n"
    "A profile with a history (memento) makes the --to ring as a running ring\n"
    "would: from the --from ring, removing what --to lacks (in --from order), then\n"
    "adding what it adds (in --to order), when --to keeps the members it shares\n"
    "with --from in their order and first.\n"
    "  --json             one JSON document: {\"profile\",\"vnodes\",\"keys\",\"moved\",\n"
    "                     \"unrouted\",\"moves\":[{\"from\",\"to\",\"keys\"}],\n"
    "                     \"nodes\":[{\"node\",\"keys_before\",\"keys_after\",\"before\",\n"
    "                     \"after\",\"ideal\"}]}; with several profiles {\"keys\",\n"
    "                     \"profiles\":[{\"profile\",\"vnodes\",\"moved\",\"keys\"}],\n"
    "                     \"skipped\":[{\"profile\",\"reason\"}]}; names must be UTF-8\n"
    "Exit status: 0 ok; 1 some key could not be routed (each reported on stderr),\n"
    "or with several profiles: one named in a list was left out, or with all, none\n"
    "could compare; 2 bad arguments.\n";

typedef struct move {
    const char *from, *to;
    unsigned long count;
} move;

static int cmp_move(const void *pa, const void *pb)
{
    const move *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    int c = strcmp(a->from, b->from);
    return c ? c : strcmp(a->to, b->to);
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

static const rl_member *member_named(const cli_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->count; i++)
        if (strcmp(spec->members[i].name, name) == 0)
            return &spec->members[i];
    return NULL;
}

static int same_zone(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* The ring of --to reached from a, the ring of --from, by changes: rl_ring_remove of each
 * member --to lacks (in --from order), then rl_ring_add of each it adds (in --to order). For a
 * profile with a history (memento) that is the placement a running ring gets (a dispatcher's
 * lanes), which a build of --to does not have. *out stays NULL when --to cannot be reached so:
 * a kept member's weight or zone differs, or --to lists the kept members in another order or
 * after a new one. */
static int changed_ring(const rl_ring_t *a, const cli_spec *from, const cli_spec *to,
                        rl_ring_t **out)
{
    *out = NULL;
    size_t kept = 0, at = 0; /* kept members seen in --to; where the last was in --from */
    for (size_t i = 0; i < to->count; i++) {
        const rl_member *m = &to->members[i], *was = member_named(from, m->name);
        if (!was)
            continue;
        if (kept++ != i || was->weight != m->weight || !same_zone(was->zone, m->zone))
            return 0; /* after a new member, or changed */
        while (at < from->count && strcmp(from->members[at].name, m->name) != 0)
            at++;
        if (at++ == from->count)
            return 0; /* out of --from's order */
    }
    rl_ring_t *cur = NULL, *next;
    int rc = 0;
    for (size_t i = 0; i < from->count && rc == 0; i++)
        if (!member_named(to, from->members[i].name)) {
            rc = rl_ring_remove(cur ? cur : a, from->members[i].name, &next);
            rl_ring_free(cur);
            cur = rc ? NULL : next;
        }
    for (size_t i = 0; i < to->count && rc == 0; i++)
        if (!member_named(from, to->members[i].name)) {
            rc = rl_ring_add(cur ? cur : a, &to->members[i], &next);
            rl_ring_free(cur);
            cur = rc ? NULL : next;
        }
    if (rc == 0 && !cur) /* no change: a copy (no member is named "") */
        rc = rl_ring_remove(a, "", &cur);
    *out = cur;
    return rc;
}

/* One profile's pair of rings while comparing several. */
typedef struct profile_diff {
    const char *name;
    rl_ring_t *from, *to;
    unsigned long moved, total;
    char why[RL_ERROR_DETAIL_MAX + 64]; /* set when the profile is left out */
} profile_diff;

/* Fills names[] from "all" or "P1,P2,..." (checked); returns the count, or -1 after a usage
 * error. `buf` holds the copied names. */
static int parse_profile_list(const char *cmd, const char *text, char *buf, const char **names,
                              size_t cap)
{
    size_t n = 0;
    if (strcmp(text, "all") == 0) {
        for (size_t i = 0; i < rl_profile_count() && n < cap; i++)
            names[n++] = rl_profile_at(i)->name;
        return (int)n;
    }
    strcpy(buf, text);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (cli_check_profile(cmd, p))
            return -1;
        if (n == cap)
            return cli_usage_error(cmd, "--profile: at most %zu profiles", cap), -1;
        names[n++] = p;
    }
    if (n == 0)
        return cli_usage_error(cmd, "--profile: expected all or P1,P2,..."), -1;
    return (int)n;
}

static int finish(const char *cmd, int rc)
{
    if (rc != CLI_EXIT_USAGE && fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return rc;
}

static void print_profiles(int json, const profile_diff *d, int n, unsigned long keys)
{
    if (!json) {
        for (int i = 0; i < n; i++)
            if (!d[i].why[0])
                printf("%s\tmoved %lu of %lu\n", d[i].name, d[i].moved, d[i].total);
        return;
    }
    printf("{\"keys\":%lu,\"profiles\":[", keys);
    const char *sep = "";
    for (int i = 0; i < n; i++) {
        if (d[i].why[0])
            continue;
        printf("%s{\"profile\":", sep);
        cli_json_name(d[i].name);
        printf(",\"vnodes\":%u,\"moved\":%lu,\"keys\":%lu}", rl_ring_vnodes(d[i].from), d[i].moved,
               d[i].total);
        sep = ",";
    }
    fputs("],\"skipped\":[", stdout);
    sep = "";
    for (int i = 0; i < n; i++) {
        if (!d[i].why[0])
            continue;
        printf("%s{\"profile\":", sep);
        cli_json_name(d[i].name);
        fputs(",\"reason\":", stdout);
        cli_json_string(d[i].why, strlen(d[i].why));
        putchar('}');
        sep = ",";
    }
    fputs("]}\n", stdout);
}

/* diff under several profiles at once: one pass over the keys, one count per profile. A
 * profile that cannot build the rings or route a key is left out, said once on stderr. */
static int diff_profiles(const char *cmd, const char *list, const cli_spec *from,
                         const cli_spec *to, int json)
{
    enum { MAX_PROFILES = 32 };
    const char *names[MAX_PROFILES];
    char *buf = malloc(strlen(list) + 1);
    profile_diff *d = calloc(MAX_PROFILES, sizeof *d);
    if (!buf || !d) {
        free(buf);
        free(d);
        return cli_usage_error(cmd, "out of memory");
    }
    int n = parse_profile_list(cmd, list, buf, names, MAX_PROFILES);
    if (n < 0) {
        free(buf);
        free(d);
        return CLI_EXIT_USAGE;
    }
    for (int i = 0; i < n; i++) {
        d[i].name = names[i];
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.profile = names[i];
        char why[RL_ERROR_DETAIL_MAX + 64];
        int rc = rl_ring_build(from->members, from->count, &o, &d[i].from);
        if (rc == 0 && rl_profile_find(names[i])->history)
            rc = changed_ring(d[i].from, from, to, &d[i].to);
        if (rc == 0 && !d[i].to)
            rc = rl_ring_build(to->members, to->count, &o, &d[i].to);
        if (rc)
            snprintf(d[i].why, sizeof d[i].why, "cannot build the rings: %s",
                     cli_build_why(names[i], rc, why, sizeof why));
    }

    char *key = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long line = 0;
    while ((len = cli_next_key(stdin, &key, &cap)) >= 0) {
        line++;
        for (int i = 0; i < n; i++) {
            uint32_t na, nb;
            if (d[i].why[0])
                continue;
            int err = rl_ring_lookup(d[i].from, key, (size_t)len, &na);
            if (!err)
                err = rl_ring_lookup(d[i].to, key, (size_t)len, &nb);
            if (err) {
                /* Its count would cover fewer keys than the others': left out. */
                snprintf(d[i].why, sizeof d[i].why, "line %lu: %s%s", line, rl_strerror(err),
                         err == RL_EBADKEY && strcmp(d[i].name, "turnstone") == 0
                             ? " (turnstone keys start with 4 hex digits)"
                             : "");
                continue;
            }
            d[i].total++;
            d[i].moved +=
                strcmp(rl_ring_node_name(d[i].from, na), rl_ring_node_name(d[i].to, nb)) != 0;
        }
    }
    free(key);

    int compared = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        if (d[i].why[0]) {
            cli_error(cmd, "%s: left out: %s", d[i].name, d[i].why);
            skipped++;
        } else {
            compared++;
        }
    }
    print_profiles(json, d, n, line);
    for (int i = 0; i < n; i++) {
        rl_ring_free(d[i].from);
        rl_ring_free(d[i].to);
    }
    int all = strcmp(list, "all") == 0;
    free(buf);
    free(d);
    return finish(cmd, (all ? compared == 0 : skipped > 0) ? CLI_EXIT_FAILURE : 0);
}

static int is_profile_list(const char *profile)
{
    return profile && (strcmp(profile, "all") == 0 || strchr(profile, ','));
}

/* "N..M": two partition counts, each 1..CLI_PARTITIONS_MAX. */
static int parse_partition_change(const char *cmd, const char *text, cli_spec *from, cli_spec *to)
{
    unsigned long long n, m;
    const char *dots = strstr(text, "..");
    char first[32];
    size_t flen = dots ? (size_t)(dots - text) : 0;
    if (!dots || flen >= sizeof first)
        return cli_usage_error(cmd,
                               "--partitions: expected N..M (from N to M partitions, each "
                               "1..%d), got '%s'",
                               CLI_PARTITIONS_MAX, text);
    memcpy(first, text, flen);
    first[flen] = 0;
    if (cli_parse_u64(first, 1, CLI_PARTITIONS_MAX, &n) != 0 ||
        cli_parse_u64(dots + 2, 1, CLI_PARTITIONS_MAX, &m) != 0)
        return cli_usage_error(cmd,
                               "--partitions: expected N..M (from N to M partitions, each "
                               "1..%d), got '%s'",
                               CLI_PARTITIONS_MAX, text);
    int rc = cli_partition_spec(cmd, n, from);
    if (rc == 0 && (rc = cli_partition_spec(cmd, m, to)) != 0)
        cli_spec_free(from);
    return rc;
}

/* The keys of each node on both rings, and the moved keys as (old << 32 | new). */
typedef struct single_diff {
    rl_ring_t *a, *b;
    unsigned long *before, *after; /* keys per node index of a, of b */
    uint64_t *pairs;
    size_t n_pairs, cap_pairs;
    unsigned long total, failed;
} single_diff;

static int count_keys(const char *cmd, single_diff *s)
{
    char *key = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long line = 0;
    int rc = 0;
    while (rc == 0 && (len = cli_next_key(stdin, &key, &cap)) >= 0) {
        line++;
        uint32_t na, nb;
        int err = rl_ring_lookup(s->a, key, (size_t)len, &na);
        if (!err)
            err = rl_ring_lookup(s->b, key, (size_t)len, &nb);
        if (err) {
            cli_error(cmd, "line %lu: %s", line, rl_strerror(err));
            s->failed++;
            continue;
        }
        s->total++;
        s->before[na]++;
        s->after[nb]++;
        if (strcmp(rl_ring_node_name(s->a, na), rl_ring_node_name(s->b, nb)) == 0)
            continue;
        if (s->n_pairs == s->cap_pairs) {
            size_t ncap = s->cap_pairs ? s->cap_pairs * 2 : 1024;
            uint64_t *p = realloc(s->pairs, ncap * sizeof *p);
            if (!p) {
                rc = cli_usage_error(cmd, "out of memory");
                break;
            }
            s->pairs = p;
            s->cap_pairs = ncap;
        }
        s->pairs[s->n_pairs++] = (uint64_t)na << 32 | nb;
    }
    free(key);
    return rc;
}

static double share(unsigned long part, unsigned long whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

/* One row of the shares table: a node of --from (index in a, or UINT32_MAX) and of --to. */
static void print_share(int json, const single_diff *s, const char *name, uint32_t ia, uint32_t ib,
                        uint64_t weight_b, const char *sep)
{
    unsigned long kb = ia != UINT32_MAX ? s->before[ia] : 0;
    unsigned long ka = ib != UINT32_MAX ? s->after[ib] : 0;
    double ideal = 0;
    if (ib != UINT32_MAX) {
        rl_member m;
        rl_ring_member(s->b, ib, &m);
        ideal = (double)m.weight / (double)weight_b;
    }
    if (!json) {
        printf("%s\t%.4f\t%.4f\t%.4f\n", name, share(kb, s->total), share(ka, s->total), ideal);
        return;
    }
    printf("%s{\"node\":", sep);
    cli_json_name(name);
    printf(",\"keys_before\":%lu,\"keys_after\":%lu,\"before\":%.9g,\"after\":%.9g,\"ideal\":"
           "%.9g}",
           kb, ka, share(kb, s->total), share(ka, s->total), ideal);
}

static void print_single(int json, const single_diff *s, const move *moves, size_t n_moves)
{
    size_t na = rl_ring_member_count(s->a), nb = rl_ring_member_count(s->b);
    uint64_t weight_b = 0;
    for (uint32_t i = 0; i < nb; i++) {
        rl_member m;
        rl_ring_member(s->b, i, &m);
        weight_b += m.weight;
    }
    if (json) {
        printf("{\"profile\":");
        cli_json_name(rl_ring_profile(s->a));
        printf(",\"vnodes\":%u,\"keys\":%lu,\"moved\":%zu,\"unrouted\":%lu,\"moves\":[",
               rl_ring_vnodes(s->a), s->total, s->n_pairs, s->failed);
        for (size_t i = 0; i < n_moves; i++) {
            printf("%s{\"from\":", i ? "," : "");
            cli_json_name(moves[i].from);
            fputs(",\"to\":", stdout);
            cli_json_name(moves[i].to);
            printf(",\"keys\":%lu}", moves[i].count);
        }
        fputs("],\"nodes\":[", stdout);
    } else {
        printf("moved %zu of %lu\n", s->n_pairs, s->total);
        for (size_t i = 0; i < n_moves; i++)
            printf("%s\t%s\t%lu\n", moves[i].from, moves[i].to, moves[i].count);
        printf("\nnode\tbefore\tafter\tideal\n");
    }
    /* The nodes of --from in order, then those only --to has. */
    for (uint32_t i = 0; i < na; i++) {
        const char *name = rl_ring_node_name(s->a, i);
        uint32_t ib;
        if (rl_ring_find(s->b, name, &ib) != 0)
            ib = UINT32_MAX;
        print_share(json, s, name, i, ib, weight_b, i ? "," : "");
    }
    for (uint32_t i = 0; i < nb; i++) {
        const char *name = rl_ring_node_name(s->b, i);
        uint32_t ia;
        if (rl_ring_find(s->a, name, &ia) != 0)
            print_share(json, s, name, UINT32_MAX, i, weight_b, na || i ? "," : "");
    }
    if (json)
        fputs("]}\n", stdout);
}

static int diff_single(const char *cmd, const char *profile, uint32_t vnodes, const cli_spec *from,
                       const cli_spec *to, int json)
{
    single_diff s = {0};
    int built = cli_build_ring(cmd, profile, vnodes, from, &s.a);
    /* A change that fails (a weight memento refuses) is built instead, to say why. */
    if (built == 0 && rl_profile_find(profile ? profile : "default")->history)
        changed_ring(s.a, from, to, &s.b);
    if (built || (!s.b && cli_build_ring(cmd, profile, vnodes, to, &s.b))) {
        rl_ring_free(s.a);
        return CLI_EXIT_USAGE;
    }
    s.before = calloc(rl_ring_member_count(s.a) + 1, sizeof *s.before);
    s.after = calloc(rl_ring_member_count(s.b) + 1, sizeof *s.after);
    int rc = s.before && s.after ? count_keys(cmd, &s) : cli_usage_error(cmd, "out of memory");
    if (rc == 0) {
        qsort(s.pairs, s.n_pairs, sizeof *s.pairs, cmp_u64);
        move *moves = malloc((s.n_pairs ? s.n_pairs : 1) * sizeof *moves);
        size_t n_moves = 0;
        for (size_t i = 0; moves && i < s.n_pairs; i++) {
            if (i == 0 || s.pairs[i] != s.pairs[i - 1])
                moves[n_moves++] = (move){rl_ring_node_name(s.a, (uint32_t)(s.pairs[i] >> 32)),
                                          rl_ring_node_name(s.b, (uint32_t)s.pairs[i]), 0};
            moves[n_moves - 1].count++;
        }
        if (!moves) {
            rc = cli_usage_error(cmd, "out of memory");
        } else {
            qsort(moves, n_moves, sizeof *moves, cmp_move);
            print_single(json, &s, moves, n_moves);
        }
        free(moves);
    }
    free(s.pairs);
    free(s.before);
    free(s.after);
    rl_ring_free(s.a);
    rl_ring_free(s.b);
    return finish(cmd, rc ? rc : s.failed ? CLI_EXIT_FAILURE : 0);
}

int cmd_diff(int argc, char **argv)
{
    const char *cmd = "diff";
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    const char *profile = NULL, *vnodes_s = NULL, *from_s = NULL, *to_s = NULL,
               *partitions_s = NULL;
    int json = 0;
    cli_opt opts[] = {{"--profile", &profile, NULL},
                      {"--vnodes", &vnodes_s, NULL},
                      {"--from", &from_s, NULL},
                      {"--to", &to_s, NULL},
                      {"--partitions", &partitions_s, NULL},
                      {"--json", NULL, &json},
                      {NULL, NULL, NULL}};
    int nrest, rc = cli_parse_opts(cmd, argc, argv, opts, NULL, &nrest);
    if (rc)
        return rc;
    uint32_t vnodes;
    int several = is_profile_list(profile);
    if (partitions_s && !profile)
        profile = CLI_PARTITIONS_PROFILE;
    if (several && vnodes_s)
        return cli_usage_error(cmd, "--vnodes: not with several profiles (each uses its own)");
    if ((!several && (rc = cli_check_profile(cmd, profile))) ||
        (!several && (rc = cli_parse_vnodes(cmd, profile, vnodes_s, &vnodes))))
        return rc;
    if (partitions_s && (from_s || to_s))
        return cli_usage_error(cmd, "give either --from SPEC --to SPEC or --partitions N..M");
    if (!partitions_s && (!from_s || !to_s))
        return cli_usage_error(cmd, "both --from SPEC and --to SPEC (or --partitions N..M) "
                                    "are required");

    cli_spec from, to;
    if (partitions_s) {
        if ((rc = parse_partition_change(cmd, partitions_s, &from, &to)))
            return rc;
    } else {
        if ((rc = cli_parse_spec(cmd, "--from", from_s, &from)))
            return rc;
        if ((rc = cli_parse_spec(cmd, "--to", to_s, &to))) {
            cli_spec_free(&from);
            return rc;
        }
    }
    if (json) {
        rc = cli_json_names(cmd, "--from", &from);
        if (rc == 0)
            rc = cli_json_names(cmd, "--to", &to);
    }
    if (rc == 0)
        rc = several ? diff_profiles(cmd, profile, &from, &to, json)
                     : diff_single(cmd, profile, vnodes, &from, &to, json);
    cli_spec_free(&from);
    cli_spec_free(&to);
    return rc;
}
