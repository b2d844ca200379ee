#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Run by `make install` and `make uninstall`: refreshes ld.so's cache when the live system was
# changed as root (no DESTDIR), so programs find the new libringlane*.so.0 in /usr/local/lib at
# once; ld.so looks there only through its cache. Harmless for other prefixes, which the cache
# does not list: their programs need LD_LIBRARY_PATH or a run path (docs/install.md).
# Usage: ldconfig-after-install.sh [DESTDIR]
set -eu
destdir="${1:-}"
[ -z "$destdir" ] || exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "ldconfig-after-install: not root, ldconfig not run (needed after installing into a" \
    "directory of /etc/ld.so.conf, such as /usr/local/lib: sudo ldconfig)"
  exit 0
fi
for ldconfig in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
  if command -v "$ldconfig" >/dev/null 2>&1; then
    "$ldconfig"
    exit 0
  fi
done
echo "ldconfig-after-install: no ldconfig found; run it before using the libraries" >&2
