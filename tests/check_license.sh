#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every source file of the repository carries the project's SPDX line within its first two lines
# (the second when the first is a #! line): C sources and headers, scripts, CMake, pkg-config
# templates, the Makefile. Data (tests/vectors/*.txt, tests/fuzz/corpus/) and prose (*.md) are
# exempt. The file list is git's when SOURCE_DIR is a checkout, else every file under it.
#
# It first proves it can fail: a scratch tree with one file with the line and one without must
# give exactly the one without.
#
# Usage: tests/check_license.sh SOURCE_DIR
set -u
root="${1:?usage: check_license.sh SOURCE_DIR}"
spdx="SPDX-License-Identifier: BSD-2-Clause"

# sources DIR: the files that must carry the line, relative to DIR.
sources() {
    if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "$1" ls-files
    else
        (cd "$1" && find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||')
    fi | grep -E '\.(c|h|sh|bash|1|py|cmake|in|map|yml)$|(^|/)(CMakeLists\.txt|Makefile|Dockerfile|run)$' |
        grep -vE '^tests/(vectors/.*\.txt|fuzz/corpus/.*)$'
}

# missing DIR: the files of DIR without the line.
missing() {
    sources "$1" | while IFS= read -r f; do
        head -n 2 "$1/$f" | grep -q "$spdx" || echo "$f"
    done
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf '/* %s */\nint a;\n' "$spdx" >"$scratch/good.c"
printf 'int b;\n' >"$scratch/bad.h"
if [ "$(missing "$scratch")" != "bad.h" ]; then
    echo "check_license: the self-test did not find exactly bad.h" >&2
    exit 1
fi

bad=$(missing "$root")
if [ -n "$bad" ]; then
    echo "check_license: files without '$spdx' in their first two lines:" >&2
    echo "$bad" >&2
    exit 1
fi
echo "check_license: $(sources "$root" | wc -l) files carry the SPDX line"
