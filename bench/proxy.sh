#!/bin/sh
# Measures the proxy on loopback and prints figures; it asserts nothing.
#   bench/proxy.sh [BUILD_DIR]         (default: build; needs wrk and curl)
# - throughput and latency at 200 connections, straight to the demo
#   backend and through the gateway;
# - how many upstream connections the gateway opened for that load;
# - the gateway's peak memory while a 1 GiB response goes to a client
#   reading at 100 MB/s;
# - the same load through a RequestRateLimiter that decides in Redis (one
#   Lua script per request; a limit high enough that all pass), and with
#   backend: local.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-200}
KEEPALIVE=${KEEPALIVE:-256}
tmp=$(mktemp -d)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {
    i=0
    until curl -s -o /dev/null "http://127.0.0.1:$1/__stats" 2>/dev/null ||
          curl -s -o /dev/null "http://127.0.0.1:$1/" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 200 ] || { echo "port $1 never opened" >&2; exit 1; }
        sleep 0.05
    done
}
stat_field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

ECHO_PORT=$(free_port)
GW_PORT=$(free_port)
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
    --loglevel warning >"$tmp/redis.log" 2>&1 &
pids="$pids $!"
"$BUILD/sluice-echo" --listen "127.0.0.1:$ECHO_PORT" >"$tmp/echo.log" 2>&1 &
pids="$pids $!"
cat >"$tmp/gw.yaml" <<YAML
server:
  listen: 127.0.0.1:$GW_PORT
  workers: auto
upstream:
  keepalive: $KEEPALIVE
redis:
  url: redis://127.0.0.1:$REDIS_PORT/0
  timeout: 100ms
log:
  level: warn
  access: off
limiters:
  huge: { algorithm: token_bucket, rate: 100000000/s, burst: 100000000 }
routes:
  - id: redis
    uri: http://127.0.0.1:$ECHO_PORT
    predicates: [Path=/limited/**]
    filters:
      - name: RequestRateLimiter
        args: { key: ip, limiter: huge, on_redis_error: deny }
  - id: local
    uri: http://127.0.0.1:$ECHO_PORT
    predicates: [Path=/local/**]
    filters:
      - name: RequestRateLimiter
        args: { key: ip, limiter: huge, backend: local }
  - id: bench
    uri: http://127.0.0.1:$ECHO_PORT
    predicates: [Path=/**]
YAML
"$BUILD/sluice" -c "$tmp/gw.yaml" >"$tmp/gw.log" 2>&1 &
gw=$!
pids="$pids $gw"
wait_port "$ECHO_PORT"
wait_port "$GW_PORT"

echo "== $CONNS connections, $DURATION, GET /bench (about 300 B JSON reply), $(nproc) cores"
echo "-- demo backend directly"
wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$ECHO_PORT/bench" |
    grep -E "Requests/sec|Latency|50%|99%"
before=$(curl -s "http://127.0.0.1:$ECHO_PORT/__stats" | stat_field connections)
echo "-- through sluice (upstream keepalive $KEEPALIVE per worker)"
wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$GW_PORT/bench" > "$tmp/wrk.txt"
grep -E "Requests/sec|Latency|50%|99%|requests in|Non-2xx|Socket errors" "$tmp/wrk.txt"
after=$(curl -s "http://127.0.0.1:$ECHO_PORT/__stats" | stat_field connections)
echo "upstream connections opened by sluice: $((after - before - 1))"
echo "sluice RSS after the load: $(grep VmRSS /proc/$gw/status | awk '{print $2}') KiB"

for kind in limited local; do
    echo "-- through sluice with a RequestRateLimiter ($kind)"
    wrk -t2 -c"$CONNS" -d"$DURATION" --latency "http://127.0.0.1:$GW_PORT/$kind/x" |
        grep -E "Requests/sec|Latency|50%|99%|Non-2xx|Socket errors"
done
echo "redis script calls: $(redis-cli -p "$REDIS_PORT" info stats | grep -E '^total_commands_processed' | tr -d '\r')"

echo "== 1 GiB response, client reading at 100 MB/s"
base=$(grep VmRSS /proc/$gw/status | awk '{print $2}')
curl -s -o /dev/null --limit-rate 100M -w "client got %{size_download} bytes in %{time_total} s\n" \
    "http://127.0.0.1:$GW_PORT/big?bytes=1073741824"
echo "sluice RSS before: $base KiB, peak (VmHWM) after: $(grep VmHWM /proc/$gw/status | awk '{print $2}') KiB"
