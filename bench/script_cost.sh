#!/bin/sh
# script_cost.sh [LUA_DIR] [ALGORITHM]: Redis's own time for one EVALSHA
# of a batch of 10 calls on one key (lua/README.md, "Batches"), read from
# INFO commandstats after redis-benchmark -n 30000 -c 20 -P 8. Starts a
# redis-server of its own on a free port and stops it. LUA_DIR defaults to
# lua/ beside this file, ALGORITHM to token_bucket; run it on a quiet
# machine, and compare two trees in the same minute.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-$here/../lua}
algo=${2:-token_bucket}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# The script as cmake/embed_lua.cmake assembles it: each
# "--#include lib/NAME.lua" line replaced by that file.
awk -v lib="$dir/lib" '
    /^--#include lib\/.*\.lua$/ {
        f = lib "/" substr($0, 15)
        while ((getline line < f) > 0) print line
        close(f)
        next
    }
    { print }' "$dir/$algo.lua" > "$tmp/script.lua"

redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --pidfile "$tmp/redis.pid" --logfile "$tmp/redis.log"
i=0
until redis-cli -p "$port" ping >/dev/null 2>&1; do
    i=$((i + 1))
    [ "$i" -lt 100 ] || { echo "redis-server did not start" >&2; exit 1; }
    sleep 0.05
done
sha=$(redis-cli -p "$port" script load "$(cat "$tmp/script.lua")")

# Ten calls of a limiter of 1e9 per second: never refused, as in the
# benchmark's Redis row.
key='sluice:huge:0:{bench:ip:127.0.0.1}:0'
set -- "$sha" 10
for i in 1 2 3 4 5 6 7 8 9 10; do set -- "$@" "$key"; done
set -- "$@" batch 10
for i in 1 2 3 4 5 6 7 8 9 10; do
    set -- "$@" 1 8 0 1 0 0 "bench-$i" 1000000000 1000 1000000000
done
reply=$(redis-cli -p "$port" evalsha "$@" | head -1)
case $reply in
1:*) ;;
*) echo "the batch failed: $reply" >&2; exit 1 ;;
esac
redis-cli -p "$port" config resetstat >/dev/null
redis-benchmark -p "$port" -n 30000 -c 20 -P 8 -q evalsha "$@" >/dev/null
redis-cli -p "$port" info commandstats |
    sed -n 's/^cmdstat_evalsha:.*usec_per_call=\([0-9.]*\).*/\1/p' |
    { read -r us; echo "$algo: $us us per EVALSHA of a batch of 10"; }
