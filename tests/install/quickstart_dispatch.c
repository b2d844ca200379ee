/* SPDX-License-Identifier: BSD-2-Clause */
/* Jobs of one key run in order: four lanes on a libuv loop, the handler on worker threads. */
#define _POSIX_C_SOURCE 200809L /* uv.h needs POSIX types that -std=c11 hides */
#include <ringlane/dispatcher.h>
#include <stdio.h>
#include <uv.h>

static int handle(rl_dispatcher_t *d, rl_dispatch_job *job)
{
    (void)d;
    printf("%s\n", (const char *)job->data); /* a worker thread; one key's jobs in order */
    return 0;                                /* non-zero: retried later, in the key's order */
}

int main(void)
{
    const char *lanes[] = {"lane-0", "lane-1", "lane-2", "lane-3"};
    rl_dispatch_options o;
    rl_dispatch_options_init(&o);
    o.lanes = lanes;
    o.lane_count = 4;
    o.handler = handle;
    rl_dispatcher_t *d = NULL;
    int rc = rl_dispatch_init(uv_default_loop(), &o, &d);
    if (rc != 0) {
        fprintf(stderr, "rl_dispatch_init: %s: %s\n", rl_strerror(rc), rl_last_error_detail());
        return 1;
    }
    char *orders[] = {"customer-42 order 1", "customer-42 order 2", "customer-42 order 3"};
    for (int i = 0; i < 3; i++)
        rl_dispatch_submit(d, "customer-42", 11, orders[i], /*tag*/ 0, /*timeout_ms*/ -1);
    rl_dispatch_close(d, RL_DISPATCH_DRAIN, NULL); /* run what is queued, then stop */
    return uv_run(uv_default_loop(), UV_RUN_DEFAULT);
}
