/* SPDX-License-Identifier: BSD-2-Clause */
#include "ringlane/version.h"

const char *rl_version_string(void)
{
    return RL_VERSION_STRING;
}

int rl_version_num(void)
{
    return RL_VERSION_NUM;
}
