#!/bin/sh
# script_cost.sh [LUA_DIR] [ALGORITHM]: Redis's own time for one EVALSHA
# of a batch of 10 calls on one key (lua/README.md, "Batches"), read from
# INFO commandstats after redis-benchmark -n 30000 -c 20 -P 8. Starts a
# redis-server of its own on a free port and stops it. LUA_DIR defaults to
# the repository's lua/, ALGORITHM to token_bucket. Run it on a quiet
# machine, and compare two trees in the same minute.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../lua}
algo=${2:-token_bucket}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
    if [ -s "$tmp/redis.pid" ]; then
        kill "$(cat "$tmp/redis.pid")" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() {
    echo "script_cost.sh: $*" >&2
    exit 1
}

# The script as cmake/embed_lua.cmake assembles it: each
# "--#include lib/NAME.lua" line replaced by that file, which must exist.
awk -v lib="$dir/lib" '
    /^--#include lib\/.*\.lua$/ {
        f = lib "/" substr($0, 16)
        n = 0
        while ((getline line < f) > 0) { print line; n++ }
        close(f)
        if (n == 0) { print FILENAME ": no file " f > "/dev/stderr"; exit 1 }
        next
    }
    { print }' "$dir/$algo.lua" > "$tmp/script.lua" ||
    fail "cannot assemble $dir/$algo.lua"

redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || fail "redis-server did not start"
    sleep 0.05
done
sha=$(redis-cli -p "$port" script load "$(cat "$tmp/script.lua")")
case $sha in
*[!0-9a-f]* | "") fail "SCRIPT LOAD: $sha" ;;
esac

# Ten calls of a limiter of 1e9 per second: never refused, as in the
# benchmark's Redis row.
key='sluice:huge:0:{bench:ip:127.0.0.1}:0'
set -- "$sha" 10
for i in 1 2 3 4 5 6 7 8 9 10; do set -- "$@" "$key"; done
set -- "$@" batch 10
for i in 1 2 3 4 5 6 7 8 9 10; do
    set -- "$@" 1 8 0 1 0 0 "bench-$i" 1000000000 1000 1000000000
done
admitted=$(redis-cli -p "$port" evalsha "$@" | grep -c '^1:' || true)
[ "$admitted" -eq 10 ] ||
    fail "the batch admitted $admitted of 10: $(redis-cli -p "$port" evalsha "$@" | head -3)"
redis-cli -p "$port" config resetstat >/dev/null
redis-benchmark -p "$port" -n 30000 -c 20 -P 8 -q evalsha "$@" >/dev/null
us=$(redis-cli -p "$port" info commandstats |
    sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p')
[ -n "$us" ] || fail "no EVALSHA in INFO commandstats"
echo "$algo: $us us per EVALSHA of a batch of 10"
