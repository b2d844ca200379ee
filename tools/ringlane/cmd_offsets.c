/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane offsets decode: reads the offset maps the ordered consumer commits as metadata
 * (docs/consumer.md, "The offset map's format"), with the consumer's own decoder. */
#include "cli.h"

#include "offset_map.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: ringlane offsets decode [--json] [TEXT...]\n"
    "\n"
    "Reads offset maps: the metadata the ordered consumer commits with a partition's\n"
    "offset (docs/consumer.md). For each TEXT, or each line of stdin when none is\n"
    "given: the base (the committed offset the map belongs to, never complete), the\n"
    "offsets it records as complete (first-last, inclusive), and how it was written.\n"
    "A text that is not a map (another tool's metadata, damaged, or of another\n"
    "version) is reported on stderr and gives exit status 1.\n"
    "  --json   one JSON object per text: {\"base\":B,\"last\":L,\"form\":\"runs\"|\n"
    "           \"bitmap\",\"bytes\":N,\"complete\":C,\"spans\":[[first,last],...]},\n"
    "           or {\"error\":\"foreign\"|\"version\"|\"corrupt\",\"reason\":R}\n";

static const char *verdict_name(int v)
{
    return v == RL__OFFSET_MAP_FOREIGN         ? "foreign"
           : v == RL__OFFSET_MAP_OTHER_VERSION ? "version"
                                               : "corrupt";
}

/* One text; returns 0, or CLI_EXIT_FAILURE when it is not a map. */
static int decode_one(const char *text, size_t len, int json)
{
    rl__offset_map m;
    const char *why = NULL;
    int v = rl__offset_map_decode(text, len, &m, &why);
    if (v != RL__OFFSET_MAP_OK) {
        if (json) {
            printf("{\"error\":\"%s\",\"reason\":", verdict_name(v));
            cli_json_string(why, strlen(why));
            printf("}\n");
        }
        cli_error("offsets", "%s: %.*s%s", why, len > 40 ? 40 : (int)len, text,
                  len > 40 ? "..." : "");
        return CLI_EXIT_FAILURE;
    }
    const char *form = m.form == RL__OFFSET_MAP_BITMAP ? "bitmap" : "runs";
    uint64_t complete = rl__offset_map_count(&m);
    if (json) {
        printf("{\"base\":%" PRId64 ",\"last\":%" PRId64 ",\"form\":\"%s\",\"bytes\":%zu,"
               "\"complete\":%" PRIu64 ",\"spans\":[",
               m.base, m.end - 1, form, len, complete);
        for (size_t i = 0; i < m.n; i++)
            printf("%s[%" PRId64 ",%" PRId64 "]", i ? "," : "", m.spans[i].start,
                   m.spans[i].end - 1);
        printf("]}\n");
    } else {
        printf("base %" PRId64 " (the committed offset), %" PRIu64
               " complete offsets up to %" PRId64 " (%s, %zu bytes):",
               m.base, complete, m.end - 1, form, len);
        for (size_t i = 0; i < m.n; i++) {
            if (m.spans[i].end - m.spans[i].start == 1)
                printf(" %" PRId64, m.spans[i].start);
            else
                printf(" %" PRId64 "-%" PRId64, m.spans[i].start, m.spans[i].end - 1);
        }
        putchar('\n');
    }
    rl__offset_map_free(&m);
    return 0;
}

int cmd_offsets(int argc, char **argv)
{
    const char *cmd = "offsets";
    if (cli_wants_help(argc, argv))
        return fputs(usage, stdout), 0;
    if (argc < 2)
        return cli_usage_error(cmd, "missing subcommand: decode (see ringlane offsets --help)");
    if (strcmp(argv[1], "decode") != 0)
        return cli_usage_error(cmd,
                               "unknown subcommand '%s': decode (see ringlane offsets "
                               "--help)",
                               argv[1]);
    int json = 0, nrest = 0;
    char **texts = calloc((size_t)argc, sizeof *texts);
    if (!texts)
        return cli_usage_error(cmd, "out of memory");
    cli_opt opts[] = {{"--json", NULL, &json}, {NULL, NULL, NULL}};
    int rc = cli_parse_opts(cmd, argc - 1, argv + 1, opts, texts, &nrest);
    if (rc) {
        free(texts);
        return rc;
    }
    int status = 0;
    for (int i = 0; i < nrest; i++)
        if (decode_one(texts[i], strlen(texts[i]), json))
            status = CLI_EXIT_FAILURE;
    free(texts);
    if (nrest == 0) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t len;
        while ((len = cli_next_key(stdin, &line, &cap)) >= 0) {
            if (len && line[len - 1] == '\r')
                len--; /* a line copied from elsewhere */
            if (decode_one(line, (size_t)len, json))
                status = CLI_EXIT_FAILURE;
        }
        free(line);
    }
    if (fflush(stdout) != 0) {
        cli_error(cmd, "cannot write the output");
        return CLI_EXIT_FAILURE;
    }
    return status;
}
