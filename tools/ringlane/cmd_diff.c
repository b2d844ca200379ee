/* ringlane diff: which keys move, and between which nodes, when membership changes. */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: ringlane diff [--profile P] [--vnodes V] --from SPEC --to SPEC\n"
    "\n"
    "Reads keys from stdin, one per line, routes each on the ring of --from and on the ring of\n"
    "--to (same profile and vnodes), and prints\n"
    "  moved <m> of <k>\n"
    "then one <old><TAB><new><TAB><count> row per pair of nodes keys moved between, most keys\n"
    "first (ties by old, then new name). SPEC is NAME[=WEIGHT],...\n"
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
    if ((rc = cli_check_profile(cmd, profile)) || (rc = cli_parse_vnodes(cmd, vnodes_s, &vnodes)))
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
    rl_ring_t *a = NULL, *b = NULL;
    if (cli_build_ring(cmd, profile, vnodes, &from, &a) ||
        cli_build_ring(cmd, profile, vnodes, &to, &b)) {
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
