/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: the command-line tool. Each command lives in its own cmd_*.c file. */
#include "cli.h"

#include <string.h>

static const char usage[] =
    "usage: ringlane COMMAND [OPTIONS]\n"
    "\n"
    "Consistent hash rings from the command line. Keys are read from stdin, one per\n"
    "line.\n"
    "  route     the node (or replicas, or bounded placement) of each key\n"
    "  diff      how many keys move, and where, between two memberships; each\n"
    "            node's share before and after\n"
    "  table     the 65536-bucket assignment table of a 16-bit ring (turnstone)\n"
    "  stats     each node's arc share and the spread of the ring\n"
    "  hash      hash strings with one of ringlane's hash functions\n"
    "  profiles  list the ring profiles (profiles NAME: one in full)\n"
    "  offsets   decode the offset maps the ordered consumer commits\n"
    "route, diff, stats and offsets take --json. 'ringlane COMMAND --help' gives a\n"
    "command's options, 'man ringlane' the manual. Exit status 2 means bad arguments.\n";

static const struct {
    const char *name;
    int (*run)(int, char **);
} commands[] = {
    {"route", cmd_route},     {"diff", cmd_diff}, {"table", cmd_table},
    {"stats", cmd_stats},     {"hash", cmd_hash}, {"profiles", cmd_profiles},
    {"offsets", cmd_offsets},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("ringlane: missing COMMAND (see ringlane --help)\n", stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0)
        return fputs(usage, stdout), 0;
    if (strcmp(argv[1], "--version") == 0)
        return printf("ringlane %s\n", rl_version_string()), 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "ringlane: unknown command '%s' (see ringlane --help)\n", argv[1]);
    return CLI_EXIT_USAGE;
}
