/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane profiles: a short table of the ring profiles, or each one in full, within 80
 * columns. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define WIDTH 80 /* columns of every line (a single word longer than that stays whole) */

static const char usage[] =
    "usage: ringlane profiles [--long] [NAME...]\n"
    "\n"
    "Lists the ring profiles as a table: name, default vnodes (- for none), hash,\n"
    "and what each is or reproduces. With NAME (one or more), or --long (all of\n"
    "them), each profile in full: what it is compatible with, kind and ring width,\n"
    "the vnodes it takes, hash, labels and successor rule. Lines are wrapped at 80\n"
    "columns.\n";

/* Writes text from column `col` on, wrapped at WIDTH; continuation lines start at `indent`. */
static void wrap(const char *text, size_t len, size_t col, size_t indent)
{
    const char *p = text, *end = text + len;
    int first = 1;
    while (p < end) {
        while (p < end && *p == ' ')
            p++;
        const char *w = p;
        while (p < end && *p != ' ')
            p++;
        size_t n = (size_t)(p - w);
        if (n == 0)
            break;
        if (!first && col + 1 + n > WIDTH) {
            printf("\n%*s", (int)indent, "");
            col = indent;
        } else if (!first) {
            putchar(' ');
            col++;
        }
        fwrite(w, 1, n, stdout);
        col += n;
        first = 0;
    }
    putchar('\n');
}

/* The first word of the hash ("xxh3-64 (libxxhash)" -> "xxh3-64"). */
static size_t short_hash(const rl_profile_info *p)
{
    size_t n = strcspn(p->hash, " (:;,");
    return n ? n : strlen(p->hash);
}

/* What the profile is, in a few words: `compatible` up to its first parenthesis. */
static size_t purpose(const rl_profile_info *p)
{
    const char *paren = strstr(p->compatible, " (");
    return paren ? (size_t)(paren - p->compatible) : strlen(p->compatible);
}

static void print_table(void)
{
    enum { NAME = 11, VNODES = 6, HASH = 8 };
    const size_t at = NAME + 1 + VNODES + 2 + HASH + 1; /* the purpose column */
    printf("%-*s %*s  %-*s %s\n", NAME, "NAME", VNODES, "VNODES", HASH, "HASH", "PURPOSE");
    for (size_t i = 0; i < rl_profile_count(); i++) {
        const rl_profile_info *p = rl_profile_at(i);
        char vnodes[16] = "-";
        if (p->max_vnodes)
            snprintf(vnodes, sizeof vnodes, "%u", p->default_vnodes);
        printf("%-*s %*s  %-*.*s ", NAME, p->name, VNODES, vnodes, HASH, (int)short_hash(p),
               p->hash);
        wrap(p->compatible, purpose(p), at, at);
    }
}

static void field(const char *label, const char *text)
{
    enum { AT = 14 };
    printf("  %-*s", AT - 2, label);
    wrap(text, strlen(text), AT, AT);
}

static void print_long(const rl_profile_info *p)
{
    char buf[320], rule[160];
    rl_profile_explain_vnodes(p->name, RL_VNODES_PROFILE, rule, sizeof rule);
    printf("%s\n", p->name);
    field("compatible", p->compatible);
    snprintf(buf, sizeof buf, "%s, %u-bit", p->kind, p->bits);
    field("kind", buf);
    if (p->max_vnodes)
        snprintf(buf, sizeof buf, "%u by default; %s", p->default_vnodes, rule);
    else
        snprintf(buf, sizeof buf, "none; %s", rule);
    field("vnodes", buf);
    field("hash", p->hash);
    field("labels", p->labels);
    field("rule", p->rule);
}

int cmd_profiles(int argc, char **argv)
{
    const char *cmd = "profiles";
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    int all = 0, nrest = 0;
    char **names = calloc((size_t)argc, sizeof *names);
    if (!names)
        return cli_usage_error(cmd, "out of memory");
    cli_opt opts[] = {{"--long", NULL, &all}, {NULL, NULL, NULL}};
    int rc = cli_parse_opts(cmd, argc, argv, opts, names, &nrest);
    for (int i = 0; rc == 0 && i < nrest; i++)
        rc = cli_check_profile(cmd, names[i]);
    if (rc == 0 && !all && nrest == 0)
        print_table();
    for (size_t i = 0; rc == 0 && all && i < rl_profile_count(); i++) {
        if (i)
            putchar('\n');
        print_long(rl_profile_at(i));
    }
    for (int i = 0; rc == 0 && !all && i < nrest; i++) {
        if (i)
            putchar('\n');
        print_long(rl_profile_find(names[i]));
    }
    free(names);
    if (rc == 0 && fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return rc;
}
