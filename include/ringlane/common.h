/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: definitions shared by every public header. */
#ifndef RINGLANE_COMMON_H
#define RINGLANE_COMMON_H

/* Marks the public API; everything else in the shared libraries stays hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define RL_EXTERN __attribute__((visibility("default")))
#else
#define RL_EXTERN
#endif

#endif
