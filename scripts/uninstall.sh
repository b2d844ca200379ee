#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# `make uninstall`: removes every file an install wrote, as its install_manifest.txt lists them
# (under DESTDIR, when the install had one: the list leaves it out), then the directories named
# ringlane that this left empty (include/ringlane, lib/cmake/ringlane, share/doc/ringlane) and
# those directly inside one (share/doc/ringlane/docs), deepest first; no other.
# Usage: uninstall.sh INSTALL_MANIFEST [DESTDIR]
set -eu
manifest="$1"
destdir="${2:-}"
if [ ! -f "$manifest" ]; then
  echo "uninstall: no $manifest (make install writes it; nothing was installed from there)" >&2
  exit 1
fi
removed=0
dirs=""
while IFS= read -r file || [ -n "$file" ]; do
  [ -n "$file" ] || continue
  path="$destdir$file"
  if [ -e "$path" ] || [ -L "$path" ]; then
    rm -f "$path"
    removed=$((removed + 1))
  fi
  dirs="$dirs$(dirname "$path")
"
done <"$manifest"
printf '%s' "$dirs" | sort -u -r | while IFS= read -r dir; do
  if [ "$(basename "$dir")" = ringlane ] || [ "$(basename "$(dirname "$dir")")" = ringlane ]; then
    rmdir "$dir" 2>/dev/null || true
  fi
done
echo "uninstall: removed $removed files listed in $manifest"
