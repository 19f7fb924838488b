#!/bin/sh
# The local stack: Redis, the demo backend and the gateway, in the
# foreground. Ctrl-C stops all three.
#   scripts/run-local.sh [BUILD_DIR]     (default: build)
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CONFIG=${SLUICE_CONFIG:-conf/gateway.yaml}
REDIS_PORT=${REDIS_PORT:-6379}
ECHO_LISTEN=${ECHO_LISTEN:-127.0.0.1:9000}

pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    echo "run-local: using the Redis already on port $REDIS_PORT"
else
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --loglevel warning &
    pids="$pids $!"
fi

"$BUILD/sluice-echo" --listen "$ECHO_LISTEN" --name demo &
pids="$pids $!"

"$BUILD/sluice" --check -c "$CONFIG"
cat <<MSG

  sluice is starting with $CONFIG. Try:
    curl -i http://127.0.0.1:8080/api/users/42
    curl -i http://127.0.0.1:8080/nowhere          (404, no route)
    curl -i http://127.0.0.1:8080/images/a.png     (rate limited: repeat it)
    curl http://127.0.0.1:9090/metrics             (admin: also /health /ready /routes)
    curl -X POST http://127.0.0.1:9090/reload      (re-read the config)
  Reload after editing the file:  kill -HUP \$(pgrep -x sluice)

MSG
"$BUILD/sluice" -c "$CONFIG" &
gw=$!
pids="$pids $gw"
wait "$gw"
