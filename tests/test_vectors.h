/* SPDX-License-Identifier: BSD-2-Clause */
/* Reading golden vector files: one record per line, '#' comments, blank lines ignored. */
#ifndef RINGLANE_TEST_VECTORS_H
#define RINGLANE_TEST_VECTORS_H

#include "test_util.h"

#define VEC_MAX_MEMBERS 64

/* Members from "name[=weight],...". Names point into `buf` (a copy of the text). */
typedef struct vec_members {
    char buf[2048];
    rl_member m[VEC_MAX_MEMBERS];
    size_t n;
} vec_members;

static inline void vec_parse_members(const char *text, vec_members *out)
{
    assert_true(strlen(text) < sizeof out->buf);
    strcpy(out->buf, text);
    out->n = 0;
    char *save = NULL;
    for (char *item = strtok_r(out->buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        assert_true(out->n < VEC_MAX_MEMBERS);
        char *eq = strchr(item, '=');
        uint32_t w = 1;
        if (eq) {
            *eq = 0;
            w = (uint32_t)strtoul(eq + 1, NULL, 10);
        }
        out->m[out->n++] = (rl_member){.name = item, .weight = w};
    }
}

/* Opens RL_VECTORS_DIR/name, failing the test if it is missing. */
static inline FILE *vec_open(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", RL_VECTORS_DIR, name);
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    return f;
}

/* The next record line without its newline, or NULL at the end. */
static inline char *vec_next(FILE *f, char *line, size_t cap)
{
    while (fgets(line, (int)cap, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] && line[0] != '#')
            return line;
    }
    return NULL;
}

/* The node index of member `name`; fails the test if absent. */
static inline uint32_t vec_node(const rl_ring_t *r, const char *name)
{
    uint32_t node;
    if (rl_ring_find(r, name, &node) != 0)
        fail_msg("no member '%s'", name);
    return node;
}

#endif
