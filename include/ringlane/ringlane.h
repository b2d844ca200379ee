/* SPDX-License-Identifier: BSD-2-Clause */
/* ringlane: key routing that keeps order. The umbrella header of the core library. */
#ifndef RINGLANE_H
#define RINGLANE_H

#include "ringlane/version.h"
#include "ringlane/error.h"
#include "ringlane/hash.h"
#include "ringlane/profile.h"
#include "ringlane/ring.h"
#include "ringlane/ring_view.h"
#include "ringlane/snapshot.h"

#endif
