# SPDX-License-Identifier: BSD-2-Clause
# bash completion for ringlane(1): commands, each command's options, profile names (asked of
# the ringlane being completed, so new profiles appear) and hash names. Installed as
# share/bash-completion/completions/ringlane; works without bash-completion's helpers.

# The profile names, from the first column of `ringlane profiles` (wrapped rows start blank).
_ringlane_profiles()
{
    "$1" profiles 2>/dev/null | awk 'NR > 1 && /^[^ ]/ { print $1 }'
}

_ringlane()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev="" cmd=${COMP_WORDS[1]:-} bin=${COMP_WORDS[0]}
    local at=$((COMP_CWORD - 1))
    COMPREPLY=()
    # --option=value: bash splits at "=" (COMP_WORDBREAKS), so the option is one word back.
    if [[ $cur == "=" ]]; then
        cur=""
        at=$((COMP_CWORD - 1))
    elif ((at > 0)) && [[ ${COMP_WORDS[at]} == "=" ]]; then
        at=$((at - 1))
    fi
    ((at > 0)) && prev=${COMP_WORDS[at]}
    case $bin in \~/*) bin=$HOME/${bin:2} ;; esac # as typed: "~/bin/ringlane"

    if ((COMP_CWORD == 1)); then
        mapfile -t COMPREPLY < <(compgen -W "route diff table stats hash profiles offsets grow
            help --help --version" -- "$cur")
        return 0
    fi
    if [[ $cmd == help ]]; then # "ringlane help COMMAND": one command's help
        ((COMP_CWORD == 2)) &&
            mapfile -t COMPREPLY < <(compgen -W "route diff table stats hash profiles offsets grow" \
                -- "$cur")
        return 0
    fi
    case $prev in
    --profile)
        local names
        names=$(_ringlane_profiles "$bin")
        [[ $cmd == diff ]] && names="all $names"
        mapfile -t COMPREPLY < <(compgen -W "$names" -- "$cur")
        return 0
        ;;
    --hash)
        mapfile -t COMPREPLY < <(compgen -W "fnv1a32 fnv1a64 hash64 xmur3 xxh3 xxh64 md5 crc32" \
            -- "$cur")
        return 0
        ;;
    --vnodes)
        [[ $cmd == grow ]] && mapfile -t COMPREPLY < <(compgen -W "default" -- "$cur")
        return 0
        ;;
    --nodes | --partitions | --replicas | --zones | --bounded | --loads | --from | --to | \
        --bootstrap-servers | --topic | --switch-wait | --announce-wait | --timeout | -X)
        return 0 # a value of the user's: nothing to offer
        ;;
    esac
    local words
    case $cmd in
    route) words="--profile --vnodes --nodes --partitions --replicas --zones --bounded --loads
        --json --help" ;;
    diff) words="--profile --vnodes --from --to --partitions --json --help" ;;
    table) words="--profile --vnodes --nodes --help" ;;
    stats) words="--profile --vnodes --nodes --json --help" ;;
    hash) words="--hash --help" ;;
    profiles) words="--long --help $(_ringlane_profiles "$bin")" ;;
    offsets)
        if ((COMP_CWORD == 2)); then
            words="decode --help"
        else
            words="--json --help" # then TEXT: a map of the user's
        fi
        ;;
    grow) words="--bootstrap-servers --topic --partitions --profile --vnodes --from
        --switch-wait --announce-only --pinned --announce-wait --timeout --status --abort -X
        --help" ;;
    *) return 0 ;;
    esac
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
    return 0
}

complete -F _ringlane ringlane
