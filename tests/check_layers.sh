#!/bin/sh
# Checks the include rules of src/ (README, Development):
# - a module includes headers of its own layer or of the layers below it,
#     base < http < identity < limit < route < config < ratelimit < gateway
#     < main
#   (limit/ratelimit.*, redis.*, rcluster.*, replyguard.*, resolve.* and
#   sentinel.* are the ratelimit layer: I/O beside the pure limiter model);
# - each library's headers are included by the one place that wraps it.
# The build already refuses most upward includes (a library sees only the
# folders below it); this also covers the two layers that share limit/,
# and names the rule that was broken.
#   tests/check_layers.sh [SRC_DIR]     (default: src)
set -eu
src=${1:-src}
cd "$src"
fail=0

layer_of() {
    case $1 in
    main.c) echo 8 ;;
    base/*) echo 0 ;;
    http/*) echo 1 ;;
    identity/*) echo 2 ;;
    limit/ratelimit.* | limit/redis.* | limit/rcluster.* | limit/resolve.* | \
        limit/sentinel.* | limit/replyguard.*)
        echo 6
        ;;
    limit/*) echo 3 ;;
    route/*) echo 4 ;;
    config/*) echo 5 ;;
    gateway/*) echo 7 ;;
    *) echo 99 ;;
    esac
}

# The file that defines header $1 (a bare name), or nothing.
header_path() {
    for f in */"$1" "$1"; do
        [ -f "$f" ] && { echo "$f"; return; }
    done
}

for file in main.c */*.c */*.h; do
    mine=$(layer_of "$file")
    if [ "$mine" = 99 ]; then
        echo "layers: $file: not in a layer's folder" >&2
        fail=1
        continue
    fi
    for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$file"); do
        target=$(header_path "$inc")
        if [ -z "$target" ]; then
            continue # generated, or from a test
        fi
        theirs=$(layer_of "$target")
        if [ "$theirs" -gt "$mine" ]; then
            echo "layers: $file includes $target, a layer above it" >&2
            fail=1
        fi
    done
done

# A system header and the only files allowed to include it.
only() {
    pattern=$1
    shift
    for file in $(grep -l "^#include <$pattern" main.c */*.c */*.h || true); do
        ok=0
        for allowed in "$@"; do
            case $file in
            $allowed) ok=1 ;;
            esac
        done
        if [ $ok = 0 ]; then
            echo "layers: $file includes <$pattern...>: only $* may" >&2
            fail=1
        fi
    done
}

only 'yaml\.h' 'config/*'
only 'hiredis/' 'limit/redis.c' 'limit/sentinel.c' 'limit/replyguard.*'
only 'http_parser\.h' 'http/resparse.c'
only 'pcre2\.h' 'route/regexp.c'
only 'openssl/' 'limit/ratekey.c' 'limit/scripts.c' 'identity/*' 'gateway/tls.c'
only 'jwt\.h' 'identity/*'
only 'jansson\.h' 'identity/*'
only 'event2/http' 'gateway/*'
only 'event2/bufferevent_ssl' 'gateway/tls.c'
only 'event2/keyvalq_struct\.h' 'gateway/*'
only 'event2/' 'gateway/*' 'limit/redis.c' 'limit/resolve.c' \
    'limit/sentinel.c' 'limit/rcluster.c'

if [ $fail = 0 ]; then
    echo "layers: every include follows the rules"
fi
exit $fail
