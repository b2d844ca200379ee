#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Every relative link of the documentation resolves: in README.md, docs/*.md and each folder's
# README.md, every Markdown link [text](target) whose target is not a URL (http:, https:,
# mailto:) or an anchor of the same page (#...) must name a file or folder of the repository,
# relative to the page; an anchor after a Markdown file (file.md#part) must be one of that
# file's headings as GitHub makes them (lower case, punctuation dropped, spaces to dashes).
# Links inside code blocks and code spans are not links and are skipped.
#
# It first proves it can fail: a page with one good and one broken link must give exactly the
# broken one.
#
# Usage: tests/check_links.sh SOURCE_DIR
set -u
root="${1:?usage: check_links.sh SOURCE_DIR}"

# anchors FILE: the anchors of a Markdown file's headings, as GitHub makes them.
anchors() {
    awk '/^[ \t]*```/ { code = !code; next }
         !code && /^#+ / { sub(/^#+ /, ""); h = tolower($0); gsub(/[^a-z0-9 _-]/, "", h)
                           gsub(/ /, "-", h); print h }' "$1"
}

# links ROOT FILE...: prints "page: target" for every relative link that resolves to nothing.
links() {
    base="$1"
    shift
    for page in "$@"; do
        dir=$(dirname "$page")
        # Markdown links outside code: drop fenced blocks and `code spans`, then take every
        # ](target) on what is left. A target ends at ")" or a space (a title may follow).
        awk '/^[ \t]*```/ { code = !code; next } !code { gsub(/`[^`]*`/, ""); print }' \
            "$base/$page" |
            grep -o '\](\([^) ]*\)' | sed 's/^](//' |
            while read -r target; do
                case "$target" in
                http:* | https:* | mailto:* | '#'* | '') continue ;;
                esac
                file="${target%%#*}"
                if [ ! -e "$base/$dir/$file" ]; then
                    echo "$page: $target"
                elif [ "$file" != "$target" ] && [ "${file%.md}" != "$file" ] &&
                    ! anchors "$base/$dir/$file" | grep -qxF "${target#*#}"; then
                    echo "$page: $target (no such heading)"
                fi
            done
    done
}

# The self-test: good links, a broken one, a missing heading, and links in code, not links.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs"
echo "## The part, here" >"$tmp/docs/a.md"
cat >"$tmp/README.md" <<'EOF'
See [a](docs/a.md#the-part-here), [the web](https://example.org/x), [here](#top), [a2](docs/a.md#nothing) and [b](docs/b.md).
Not links: `[x](nowhere.md)`, and
```
[y](nowhere-either.md)
```
EOF
got=$(links "$tmp" README.md)
want="README.md: docs/a.md#nothing (no such heading)
README.md: docs/b.md"
if [ "$got" != "$want" ]; then
    echo "check_links: the self-test expected exactly '$want', got: '$got'"
    exit 1
fi

cd "$root" || exit 2
pages="README.md"
for f in docs/*.md */README.md; do
    [ -f "$f" ] && pages="$pages $f"
done
# shellcheck disable=SC2086 # a list of paths without spaces
broken=$(links . $pages)
count=0
for p in $pages; do
    n=$(awk '/^[ \t]*```/ { code = !code; next } !code { gsub(/`[^`]*`/, ""); print }' "$p" |
        grep -o '\](\([^) ]*\)' | grep -cv '](\(https\?:\|mailto:\|#\)')
    count=$((count + n))
done
if [ -n "$broken" ]; then
    echo "check_links: links that resolve to nothing:"
    echo "$broken"
    exit 1
fi
echo "check_links: $count relative links in $(echo "$pages" | wc -w) pages, all resolve"
