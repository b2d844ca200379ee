/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane diff: which keys move, and between which nodes, when membership changes. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: ringlane diff [--profile P] [--vnodes V] --from SPEC --to SPEC\n"
    "       ringlane diff --profile all|P1,P2,... --from SPEC --to SPEC\n"
    "\n"
    "Reads keys from stdin, one per line, routes each on the ring of --from and on the ring of\n"
    "--to (same profile and vnodes), and prints\n"
    "  moved <m> of <k>\n"
    "then one <old><TAB><new><TAB><count> row per pair of nodes keys moved between, most keys\n"
    "first (ties by old, then new name). SPEC is NAME[=WEIGHT],...\n"
    "With several profiles (all: every profile), each uses its default vnodes and the output is\n"
    "one <profile><TAB>moved <m> of <k> line per profile, in the order given, to compare what\n"
    "the same membership change costs under each. A profile that cannot build these rings\n"
    "(e.g. jump with weights) or route some keys (turnstone: non-hex keys) says so on stderr.\n"
    "A profile with a history (memento) makes the --to ring as a running ring would: from the\n"
    "--from ring, removing what --to lacks (in --from order), then adding what it adds (in --to\n"
    "order), when --to keeps the members it shares with --from in their order and first.\n"
    "Exit status: 0 ok, 1 some key could not be routed (reported on stderr), 2 bad arguments.\n";

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
    unsigned long moved, total, failed;
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

/* diff under several profiles at once: one pass over the keys, one count per profile. */
static int diff_profiles(const char *cmd, const char *list, const cli_spec *from,
                         const cli_spec *to)
{
    enum { MAX_PROFILES = 32 };
    const char *names[MAX_PROFILES];
    char *buf = malloc(strlen(list) + 1);
    if (!buf)
        return cli_usage_error(cmd, "out of memory");
    int n = parse_profile_list(cmd, list, buf, names, MAX_PROFILES);
    if (n < 0) {
        free(buf);
        return CLI_EXIT_USAGE;
    }
    profile_diff d[MAX_PROFILES];
    memset(d, 0, sizeof d);
    int skipped = 0;
    for (int i = 0; i < n; i++) {
        d[i].name = names[i];
        rl_ring_options o;
        rl_ring_options_init(&o);
        o.profile = names[i];
        int rc = rl_ring_build(from->members, from->count, &o, &d[i].from);
        if (rc == 0 && rl_profile_find(names[i])->history)
            rc = changed_ring(d[i].from, from, to, &d[i].to);
        if (rc == 0 && !d[i].to)
            rc = rl_ring_build(to->members, to->count, &o, &d[i].to);
        if (rc) {
            if (rc == RL_EWEIGHT && strcmp(rl_profile_find(names[i])->kind, "computed") == 0)
                cli_error(cmd, "%s: cannot build the rings: %s buckets take no weights", names[i],
                          names[i]);
            else
                cli_error(cmd, "%s: cannot build the rings: %s", names[i], rl_strerror(rc));
            rl_ring_free(d[i].from);
            d[i].from = NULL;
            skipped++;
        }
    }

    char *key = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = cli_next_key(stdin, &key, &cap)) >= 0) {
        for (int i = 0; i < n; i++) {
            uint32_t na, nb;
            if (!d[i].from)
                continue;
            if (rl_ring_lookup(d[i].from, key, (size_t)len, &na) ||
                rl_ring_lookup(d[i].to, key, (size_t)len, &nb)) {
                d[i].failed++;
                continue;
            }
            d[i].total++;
            d[i].moved +=
                strcmp(rl_ring_node_name(d[i].from, na), rl_ring_node_name(d[i].to, nb)) != 0;
        }
    }
    free(key);

    unsigned long failed = 0;
    for (int i = 0; i < n; i++) {
        if (!d[i].from)
            continue;
        printf("%s\tmoved %lu of %lu\n", d[i].name, d[i].moved, d[i].total);
        if (d[i].failed)
            cli_error(cmd, "%s: %lu keys could not be routed", d[i].name, d[i].failed);
        failed += d[i].failed;
        rl_ring_free(d[i].from);
        rl_ring_free(d[i].to);
    }
    free(buf);
    if (fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return failed || skipped ? CLI_EXIT_FAILURE : 0;
}

static int is_profile_list(const char *profile)
{
    return profile && (strcmp(profile, "all") == 0 || strchr(profile, ','));
}

int cmd_diff(int argc, char **argv)
{
    const char *cmd = "diff";
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    const char *profile = NULL, *vnodes_s = NULL, *from_s = NULL, *to_s = NULL;
    cli_opt opts[] = {{"--profile", &profile, NULL},
                      {"--vnodes", &vnodes_s, NULL},
                      {"--from", &from_s, NULL},
                      {"--to", &to_s, NULL},
                      {NULL, NULL, NULL}};
    int nrest, rc = cli_parse_opts(cmd, argc, argv, opts, NULL, &nrest);
    if (rc)
        return rc;
    uint32_t vnodes;
    if (is_profile_list(profile) && vnodes_s)
        return cli_usage_error(cmd, "--vnodes: not with several profiles (each uses its own)");
    if ((!is_profile_list(profile) && (rc = cli_check_profile(cmd, profile))) ||
        (rc = cli_parse_vnodes(cmd, vnodes_s, &vnodes)))
        return rc;
    if (!from_s || !to_s)
        return cli_usage_error(cmd, "both --from SPEC and --to SPEC are required");

    cli_spec from, to;
    if ((rc = cli_parse_spec(cmd, "--from", from_s, &from)))
        return rc;
    if ((rc = cli_parse_spec(cmd, "--to", to_s, &to))) {
        cli_spec_free(&from);
        return rc;
    }
    if (is_profile_list(profile)) {
        rc = diff_profiles(cmd, profile, &from, &to);
        cli_spec_free(&from);
        cli_spec_free(&to);
        return rc;
    }
    rl_ring_t *a = NULL, *b = NULL;
    rc = cli_build_ring(cmd, profile, vnodes, &from, &a);
    /* A change that fails (a weight memento refuses) is built instead, to say why. */
    if (rc == 0 && rl_profile_find(profile ? profile : "default")->history)
        changed_ring(a, &from, &to, &b);
    if (rc || (!b && cli_build_ring(cmd, profile, vnodes, &to, &b))) {
        rl_ring_free(a);
        cli_spec_free(&from);
        cli_spec_free(&to);
        return CLI_EXIT_USAGE;
    }

    /* Each moved key is recorded as (old << 32 | new) and counted after a sort: memory grows
     * with the moved keys only, whatever the number of nodes. */
    uint64_t *pairs = NULL;
    size_t n_pairs = 0, cap_pairs = 0;
    char *key = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned long line = 0, total = 0, failed = 0;
    while (rc == 0 && (len = cli_next_key(stdin, &key, &cap)) >= 0) {
        line++;
        uint32_t na, nb;
        int err = rl_ring_lookup(a, key, (size_t)len, &na);
        if (!err)
            err = rl_ring_lookup(b, key, (size_t)len, &nb);
        if (err) {
            cli_error(cmd, "line %lu: %s", line, rl_strerror(err));
            failed++;
            continue;
        }
        total++;
        if (strcmp(rl_ring_node_name(a, na), rl_ring_node_name(b, nb)) == 0)
            continue;
        if (n_pairs == cap_pairs) {
            size_t ncap = cap_pairs ? cap_pairs * 2 : 1024;
            uint64_t *p = realloc(pairs, ncap * sizeof *p);
            if (!p) {
                rc = cli_usage_error(cmd, "out of memory");
                break;
            }
            pairs = p;
            cap_pairs = ncap;
        }
        pairs[n_pairs++] = (uint64_t)na << 32 | nb;
    }
    free(key);

    if (rc == 0) {
        qsort(pairs, n_pairs, sizeof *pairs, cmp_u64);
        move *moves = malloc((n_pairs ? n_pairs : 1) * sizeof *moves);
        size_t n_moves = 0;
        for (size_t i = 0; moves && i < n_pairs; i++) {
            if (i == 0 || pairs[i] != pairs[i - 1])
                moves[n_moves++] = (move){rl_ring_node_name(a, (uint32_t)(pairs[i] >> 32)),
                                          rl_ring_node_name(b, (uint32_t)pairs[i]), 0};
            moves[n_moves - 1].count++;
        }
        if (!moves) {
            rc = cli_usage_error(cmd, "out of memory");
        } else {
            qsort(moves, n_moves, sizeof *moves, cmp_move);
            printf("moved %zu of %lu\n", n_pairs, total);
            for (size_t i = 0; i < n_moves; i++)
                printf("%s\t%s\t%lu\n", moves[i].from, moves[i].to, moves[i].count);
        }
        free(moves);
    }
    free(pairs);
    rl_ring_free(a);
    rl_ring_free(b);
    cli_spec_free(&from);
    cli_spec_free(&to);
    if (rc)
        return rc;
    if (fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return failed ? CLI_EXIT_FAILURE : 0;
}
