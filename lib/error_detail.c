/* SPDX-License-Identifier: BSD-2-Clause */
/* The per-thread detail of the last refusal (rl_last_error_detail). Thread-local, as dlerror()
 * and errno are, so constructors keep their signatures and a refusal on one thread never
 * overwrites what another is reading. */
#include <stdarg.h>
#include <stdio.h>

#include "ringlane/error.h"

static _Thread_local char detail[RL_ERROR_DETAIL_MAX];

const char *rl_last_error_detail(void)
{
    return detail;
}

int rl_error_detail_set(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    /* vsnprintf cuts and terminates; a format error leaves an empty detail, not garbage. */
    if (vsnprintf(detail, sizeof detail, fmt, ap) < 0)
        detail[0] = '\0';
    va_end(ap);
    return err;
}

void rl_error_detail_clear(void)
{
    detail[0] = '\0';
}
