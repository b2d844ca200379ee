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
#ifdef RINGLANE_CLI_GROW
    "  grow      grow a Kafka topic without breaking per-key order\n"
#endif
    "route, diff, stats and offsets take --json. 'ringlane COMMAND --help' or\n"
    "'ringlane help COMMAND' gives a command's options, 'man ringlane' the manual.\n"
    "Exit status 2 means bad arguments.\n";

static const struct {
    const char *name;
    int (*run)(int, char **);
} commands[] = {
    {"route", cmd_route},     {"diff", cmd_diff}, {"table", cmd_table},
    {"stats", cmd_stats},     {"hash", cmd_hash}, {"profiles", cmd_profiles},
    {"offsets", cmd_offsets},
#ifdef RINGLANE_CLI_GROW
    {"grow", cmd_grow},
#endif
};

static int (*command_named(const char *name))(int, char **)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run;
    return NULL;
}

/* "ringlane help [COMMAND]": the usage, or COMMAND's help as "ringlane COMMAND --help" gives
 * it. */
static int help(int argc, char **argv)
{
    if (argc == 0)
        return fputs(usage, stdout), 0;
    int (*run)(int, char **) = command_named(argv[0]);
    if (!run) {
        fprintf(stderr, "ringlane help: unknown command '%s' (see ringlane --help)\n", argv[0]);
        return CLI_EXIT_USAGE;
    }
    if (argc > 1) {
        fprintf(stderr, "ringlane help: one command at a time ('%s' after '%s')\n", argv[1],
                argv[0]);
        return CLI_EXIT_USAGE;
    }
    static char help_option[] = "--help";
    char *args[] = {argv[0], help_option, NULL};
    return run(2, args);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("ringlane: missing COMMAND (see ringlane --help)\n", stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return fputs(usage, stdout), 0;
    if (strcmp(argv[1], "help") == 0)
        return help(argc - 2, argv + 2);
    if (strcmp(argv[1], "--version") == 0)
        return printf("ringlane %s\n", rl_version_string()), 0;
    int (*run)(int, char **) = command_named(argv[1]);
    if (run)
        return run(argc - 1, argv + 1);
    fprintf(stderr, "ringlane: unknown command '%s' (see ringlane --help)\n", argv[1]);
    return CLI_EXIT_USAGE;
}
