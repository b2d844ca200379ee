/* SPDX-License-Identifier: BSD-2-Clause */
#include "ringlane/error.h"

const char *rl_strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
#define RL__ERRNO_MSG(name, value, msg)                                                            \
    case RL_##name:                                                                                \
        return msg;
        RL_ERRNO_MAP(RL__ERRNO_MSG)
#undef RL__ERRNO_MSG
    default:
        return "unknown error";
    }
}

const char *rl_err_name(int err)
{
    switch (err) {
    case 0:
        return "RL_OK";
#define RL__ERRNO_NAME(name, value, msg)                                                           \
    case RL_##name:                                                                                \
        return "RL_" #name;
        RL_ERRNO_MAP(RL__ERRNO_NAME)
#undef RL__ERRNO_NAME
    default:
        return "RL_UNKNOWN";
    }
}
