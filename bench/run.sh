#!/bin/bash
# bench/run.sh [BUILD_DIR] - sluice's comparative benchmark (bench/README.md).
#
# Starts, on 127.0.0.1, one nginx backend answering "200 ok", Redis, nginx,
# HAProxy and sluice in front of that backend, and measures with wrk -t1,
# keep-alive, interleaved over REPS repetitions, after a warm-up:
#
#    1  backend direct          the backend nginx itself: the ceiling
#    2  nginx proxy             nginx reverse proxy, 1 worker, upstream keepalive 256
#    3  haproxy                 HAProxy, 1 thread, http-reuse always
#    4  nginx limit_req flood   nginx limit_req at 1 r/s: almost every answer 429
#    5  nginx+lua+redis         ngx_lua + lua-resty-redis, EVALSHA of a token
#                               bucket on every request over a keep-alive
#                               pool (the mechanism of Kong's and APISIX's
#                               Redis policies), never refusing
#    5  nginx+lua+redis flood   the same at 1/s burst 1: almost every answer 429
#    6  sluice                  sluice, 1 worker, no limiter
#    6  sluice redis            RequestRateLimiter, Redis token bucket, never refusing
#    6  sluice cluster          the same against a Redis Cluster of three
#                               primaries (one key: one slot, one primary)
#    6  sluice local            the same limiter with backend: local
#    6  sluice flood            Redis token bucket 1/s burst 1, one exhausted key
#    6  sluice hot, leases      the Redis token bucket with lease: 1000 (one hot
#                               key: a worker admits from its lease)
#    7  sluice 2 workers        sluice with server.workers: 2, no limiter
#    7  nginx proxy 2 workers   row 2 with worker_processes 2
#    9  nginx https upstream    row 2 to the backend over TLS (verified,
#                               sessions reused, keepalive 256)
#    9  sluice https upstream   row 6 to the backend over TLS (verified)
#    9  nginx TLS listener      row 2 with wrk speaking TLS to nginx
#    9  sluice TLS listener     row 6 with wrk speaking TLS to sluice's
#                               server.tls; one certificate for all four
#
# then the figures that do not move with machine noise: system calls
# (strace -c) and instructions (callgrind) per proxied request, Redis
# commands per decision, resident memory with IDLE_CONNS idle keep-alive
# clients, and peak memory while streaming STREAM_BYTES to a slow client.
#
# It asserts nothing: it exits non-zero only when a run failed (a process
# did not start, wrk failed), never because of a figure.
#
# Environment:
#   DURATION=10s WARMUP=2s REPS=3 CONNS="50 200"   the timed runs
#   ROWS="sluice nginx ..."   only these rows (ids: see ROW_IDS below)
#   SKIP_SLOW=1               skip callgrind, the idle connections and the stream
#   STRACE_N=20000 CALLGRIND_N=2000 REDIS_N=20000 COUNT_CONNS=<first of CONNS>
#   IDLE_CONNS=10000 STREAM_BYTES=1073741824 STREAM_RATE=10M
#   KEEP=1                    keep the temporary directory (configurations, logs)
#   PEERS=batch               run wrk, the backend and Redis under SCHED_BATCH,
#                             so that their wakeups never preempt the proxy
#
# Progress goes to stderr, the report to stdout.
# Functions called through wait_until/ready look unreachable to shellcheck.
# shellcheck disable=SC2317,SC2015,SC2012
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -gt 0 ]; then
    BUILD=$(cd "$1" 2>/dev/null && pwd) || { echo "bench: no directory $1" >&2; exit 1; }
else
    BUILD=$ROOT/build
fi

DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
REPS=${REPS:-3}
CONNS=${CONNS:-"50 200"}
ROWS=${ROWS:-}
SKIP_SLOW=${SKIP_SLOW:-0}
STRACE_N=${STRACE_N:-20000}
CALLGRIND_N=${CALLGRIND_N:-2000}
REDIS_N=${REDIS_N:-20000}
COUNT_CONNS=${COUNT_CONNS:-${CONNS%% *}}
IDLE_CONNS=${IDLE_CONNS:-10000}
STREAM_BYTES=${STREAM_BYTES:-1073741824}
STREAM_RATE=${STREAM_RATE:-10M}
PEERS=${PEERS:-normal}

# PEER: the prefix of the commands that stand in for other machines (the
# load generator, the backend, Redis). With PEERS=batch they run under
# SCHED_BATCH: the scheduler gives them the same share of the CPUs, but a
# wakeup of theirs never preempts the running proxy, as a process on
# another machine cannot (bench/README.md, "Eleventh session").
case $PEERS in
normal) PEER=() ;;
batch) PEER=(chrt --batch 0) ;;
*) echo "bench: PEERS is normal or batch, not $PEERS" >&2; exit 1 ;;
esac

# The Debian packages of everything below (nginx-light pulls in nginx; the
# Lua module needs nginx's ndk module, a dependency of libnginx-mod-http-lua).
PACKAGES="wrk nginx-light libnginx-mod-http-lua lua-nginx-redis haproxy
redis-server strace valgrind curl python3"
NGINX_MODULES=/usr/lib/nginx/modules

# The rows, in table order: id, number in the issue, label.
ROW_IDS=(direct nginx haproxy limit_req lua lua_flood
         sluice sluice_redis sluice_hot sluice_cluster sluice_local
         sluice_flood sluice_jwt sluice_jwt_nc sluice_2w nginx_2w evhttp
         nginx_tls_up sluice_tls_up nginx_tls_in sluice_tls_in)
declare -A NUM=(
    [direct]=1 [nginx]=2 [haproxy]=3 [limit_req]=4 [lua]=5 [lua_flood]=5
    [sluice]=6 [sluice_redis]=6 [sluice_hot]=6 [sluice_cluster]=6
    [sluice_local]=6 [sluice_flood]=6
    [sluice_jwt]=6 [sluice_jwt_nc]=6
    [sluice_2w]=7 [nginx_2w]=7 [evhttp]=8
    [nginx_tls_up]=9 [sluice_tls_up]=9 [nginx_tls_in]=9 [sluice_tls_in]=9)
declare -A LABEL=(
    [direct]="backend direct" [nginx]="nginx proxy" [haproxy]="haproxy"
    [limit_req]="nginx limit_req flood" [lua]="nginx+lua+redis"
    [lua_flood]="nginx+lua+redis flood" [sluice]="sluice"
    [sluice_redis]="sluice redis" [sluice_cluster]="sluice cluster"
    [sluice_hot]="sluice hot, leases"
    [sluice_local]="sluice local"
    [sluice_flood]="sluice flood" [sluice_jwt]="sluice jwt, cached"
    [sluice_jwt_nc]="sluice jwt, no cache" [sluice_2w]="sluice 2 workers"
    [nginx_2w]="nginx proxy 2 workers" [evhttp]="bare evhttp, ok"
    [nginx_tls_up]="nginx https upstream" [sluice_tls_up]="sluice https upstream"
    [nginx_tls_in]="nginx TLS listener" [sluice_tls_in]="sluice TLS listener")
# Rows that refuse almost every request on purpose.
FLOOD_ROWS=" limit_req lua_flood sluice_flood "

declare -A URL PID
# A header wrk sends with every request of a row (the JWT rows' token).
declare -A WRK_HEADER
ROW_LIST=()
FAILED=0
START=$(date +%s)

# ---------------------------------------------------------------- helpers

say() { printf '%s\n' "$*"; }               # the report (stdout)
note() { printf '.. %s\n' "$*" >&2; }        # progress (stderr)
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }
fail() { printf 'bench: FAILED: %s\n' "$*" >&2; FAILED=1; }

# want ROW: true when ROW is selected by $ROWS (all rows when it is empty).
want() {
    [ -z "$ROWS" ] && return 0
    case " ${ROWS//,/ } " in *" $1 "*) return 0 ;; esac
    return 1
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_bg NAME COMMAND...: run COMMAND in the background, output in
# $tmp/NAME.log, its pid in PID[NAME]; cleanup stops it.
start_bg() {
    local name=$1; shift
    "$@" >"$tmp/$name.log" 2>&1 &
    PID[$name]=$!
}

# stop_bg NAME [SIGNAL]: stop it and wait for it, KILL after 10 s.
stop_bg() {
    local name=$1 sig=${2:-TERM} pid=${PID[$1]:-}
    [ -n "$pid" ] || return 0
    kill -"$sig" "$pid" 2>/dev/null
    wait_until 10 "$name to exit" gone "$pid" || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    unset "PID[$name]"
}

# fg_run NAME COMMAND...: COMMAND in the foreground, but interruptible: a
# signal to the script stops it too (cleanup knows it as NAME).
fg_run() {
    local name=$1 rc; shift
    "$@" &
    PID[$name]=$!
    wait "${PID[$name]}"; rc=$?
    unset "PID[$name]"
    return $rc
}

gone() { ! kill -0 "$1" 2>/dev/null; }

# wait_until SECONDS WHAT COMMAND...: poll COMMAND until it succeeds; false
# (with a message) past the deadline.
wait_until() {
    local limit=$1 what=$2 end; shift 2
    end=$(($(date +%s) + limit))
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$end" ]; then
            printf 'bench: timed out after %ss waiting for %s\n' "$limit" "$what" >&2
            return 1
        fi
        sleep 0.05
    done
}

http_ok() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$1")" = 200 ]; }
redis_up() { [ "$(redis-cli -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ]; }
# attached FILE N: strace printed N "attached" lines in FILE.
attached() { [ "$(grep -c attached "$1" 2>/dev/null)" -ge "$2" ]; }

# ready NAME SECONDS COMMAND...: wait for a started process to be ready
# (COMMAND succeeds); stop the benchmark, with its log, when it died or
# never became ready.
ready() {
    local name=$1 limit=$2 end; shift 2
    end=$(($(date +%s) + limit))
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "${PID[$name]}" 2>/dev/null || [ "$(date +%s)" -ge "$end" ]; then
            tail -n 20 "$tmp/$name.log" "$tmp/$name/error.log" >&2 2>/dev/null
            die "$name did not start"
        fi
        sleep 0.05
    done
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
children() { pgrep -P "$1" | tr '\n' ' '; }      # nginx's workers
first_child() { pgrep -P "$1" | head -n 1; }

# wrk_header ROW: sets HDR to wrk's arguments for the row's header, if any.
wrk_header() {
    HDR=()
    [ -n "${WRK_HEADER[$1]:-}" ] && HDR=(-H "${WRK_HEADER[$1]}")
    return 0
}

# field NAME LINE: the value of NAME=value in a "BENCH k=v ..." line.
field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"; }

# ratio A B: A / B with two decimals, "-" when either is missing.
ratio() {
    case "${1:--} ${2:--}" in -\ * | *\ -) printf -- '-'; return ;; esac
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "-" }'
}

seconds_of() {   # 10s, 2m, 500ms -> seconds (integer, rounded up)
    case $1 in
        *ms) echo $(((${1%ms} + 999) / 1000)) ;;
        *s) echo "${1%s}" ;;
        *m) echo $((${1%m} * 60)) ;;
        *) echo "$1" ;;
    esac
}

bytes_of() {     # curl's --limit-rate units: 10M -> 10485760
    case $1 in
        *[kK]) echo $((${1%?} * 1024)) ;;
        *[mM]) echo $((${1%?} * 1048576)) ;;
        *[gG]) echo $((${1%?} * 1073741824)) ;;
        *) echo "$1" ;;
    esac
}

cleanup() {
    local rc=$? name pid end
    trap - EXIT INT TERM
    local pids=""
    for name in "${!PID[@]}"; do
        pid=${PID[$name]}
        pids="$pids $pid $(children "$pid")"
        kill -TERM "$pid" 2>/dev/null
    done
    end=$(($(date +%s) + 10))
    for pid in $pids; do
        while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do
            sleep 0.05
        done
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "${KEEP:-0}" = 1 ]; then
        printf 'bench: configurations and logs kept in %s\n' "$tmp" >&2
    else
        rm -rf "$tmp"
    fi
    exit "$rc"
}

# ---------------------------------------------------------------- set-up

[ -x "$BUILD/sluice" ] && [ -x "$BUILD/sluice-echo" ] ||
    die "no $BUILD/sluice or $BUILD/sluice-echo: build first (make build)"
for r in ${ROWS//,/ }; do
    [ -n "${NUM[$r]:-}" ] || die "unknown row \"$r\"; rows: ${ROW_IDS[*]}"
done
# shellcheck disable=SC2086
"$ROOT/scripts/install-deps.sh" $PACKAGES || die "could not install: $PACKAGES"

# 10,000 idle clients need as many descriptors in the client and the proxy.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ $((IDLE_CONNS + 512)) -gt "$NOFILE" ]; then
    IDLE_CONNS=$((NOFILE - 512))
    note "open-file limit $NOFILE: IDLE_CONNS lowered to $IDLE_CONNS"
fi
[ "$NOFILE" = unlimited ] && NOFILE=1048576
MAXCONN=$((IDLE_CONNS + 256))
# HAProxy reserves two descriptors per connection (client and server side).
HAPROXY_MAXCONN=$(( (NOFILE - 128) / 2 < MAXCONN ? (NOFILE - 128) / 2 : MAXCONN ))

tmp=$(mktemp -d /tmp/sluice-bench.XXXXXX)
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BACKEND_PORT=$(free_port)
REDIS_PORT=$(free_port)
NGINX_PORT=$(free_port)
NGINX2_PORT=$(free_port)
HAPROXY_PORT=$(free_port)
SLUICE_PORT=$(free_port)
SLUICE_ADMIN=$(free_port)
SLUICE2_PORT=$(free_port)
SLUICE2_ADMIN=$(free_port)
ECHO_PORT=$(free_port)
EVHTTP_PORT=$(free_port)
BACKEND_TLS_PORT=$(free_port)
NGINX_TLS_PORT=$(free_port)
SLUICE_TLS_PORT=$(free_port)

# nginx_conf DIR WORKERS MODULES HTTP: an nginx.conf of its own in DIR, all
# its files in DIR, never the system's configuration.
nginx_conf() {
    local dir=$1 workers=$2 modules=$3 http=$4
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<EOF
$modules
worker_processes $workers;
worker_rlimit_nofile $NOFILE;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections $((MAXCONN + 1024)); }
http {
    access_log off;
    default_type text/plain;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
$http
}
EOF
}

# start_nginx NAME [GLOBAL-DIRECTIVES]: nginx in the foreground on
# $tmp/NAME/nginx.conf.
start_nginx() {
    local dir=$tmp/$1 peer=()
    [ "$1" = backend ] && peer=("${PEER[@]}")
    start_bg "$1" "${peer[@]}" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
        -g "daemon off; ${2:-}"
}

# The upstream block and proxy settings rows 2, 4, 5 and 7 share.
proxy_http() {
    cat <<EOF
    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 256;
        keepalive_requests 1000000000;
    }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
EOF
}

# Row 5: the token bucket of bench/token_bucket.lua by EVALSHA on every
# request, over lua-resty-redis's keep-alive pool (Debian installs it as
# nginx.redis); 429 when refused, 500 when Redis fails.
lua_http() {
    cat <<EOF
    lua_package_path "/usr/share/lua/5.1/?.lua;;";
    init_by_lua_block {
        local redis = require "nginx.redis"
        local M = {}
        function M.take(prefix, rate, burst)
            local red = redis:new()
            red:set_timeout(100)
            local ok, err = red:connect("127.0.0.1", $REDIS_PORT)
            if not ok then
                ngx.log(ngx.ERR, "redis connect: ", err)
                return ngx.exit(500)
            end
            local res
            res, err = red:evalsha("$TB_SHA", 1, prefix .. ngx.var.remote_addr,
                                   rate, burst, ngx.now() * 1000, 1)
            if not res then
                ngx.log(ngx.ERR, "redis evalsha: ", err)
                return ngx.exit(500)
            end
            red:set_keepalive(10000, 256)
            if res[1] == 0 then
                return ngx.exit(429)
            end
        end
        package.loaded.bench_tb = M
    }
EOF
}

# sluice_conf FILE PORT ADMIN WORKERS [TLS_PORT]: the gateway, one route
# per row 6 variant on one listener (and on a TLS listener on TLS_PORT);
# /big streams from sluice-echo; /tlsup/ goes to the backend over TLS.
sluice_conf() {
    local tls=""
    [ -n "${5:-}" ] && tls="  tls: { listen: 127.0.0.1:$5, cert_file: $tmp/tls/srv.pem, key_file: $tmp/tls/srv.key }"
    cat >"$1" <<EOF
server:
  listen: 127.0.0.1:$2
$tls
  workers: $4
  max_connections: $MAXCONN
  drain_timeout: 1s
admin:
  listen: 127.0.0.1:$3
redis:
  url: redis://127.0.0.1:$REDIS_PORT/0
  timeout: 100ms
upstream:
  keepalive: 256
log:
  level: warn
  access: off
limiters:
  huge: { algorithm: token_bucket, rate: 1000000000/s, burst: 1000000000 }
  flood: { algorithm: token_bucket, rate: 1/s, burst: 1 }
  hot: { algorithm: token_bucket, rate: 1000000000/s, burst: 1000000000, lease: 1000 }
routes:
  - id: plain
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/plain/**' ]
  - id: redis
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/redis/**' ]
    filters:
      - name: RequestRateLimiter
        args: { key: ip, limiter: huge, on_redis_error: deny }
  - id: hot
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/hot/**' ]
    filters:
      - name: RequestRateLimiter
        args: { key: route, limiter: hot, on_redis_error: deny }
  - id: local
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/local/**' ]
    filters:
      - name: RequestRateLimiter
        args: { key: ip, limiter: huge, backend: local }
  - id: flood
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/flood/**' ]
    filters:
      - name: RequestRateLimiter
        args: { key: ip, limiter: flood, on_redis_error: deny }
  - id: big
    uri: http://127.0.0.1:$ECHO_PORT
    predicates: [ 'Path=/big' ]
  - id: tlsup
    uri: https://localhost:$BACKEND_TLS_PORT
    predicates: [ 'Path=/tlsup/**' ]
    tls: { ca_file: $tmp/tls/ca.pem }
EOF
}

# make_certs: a CA and, signed by it, one certificate for localhost and
# 127.0.0.1 (EC P-256), in $tmp/tls: the backend's and both listeners'.
make_certs() {
    mkdir -p "$tmp/tls" && (
        cd "$tmp/tls" || exit 1
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -keyout ca.key -out ca.pem -subj /CN=bench-ca -days 2 &&
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -keyout srv.key -out srv.csr -subj /CN=localhost &&
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >san.ext &&
            openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key \
                -CAcreateserial -days 2 -extfile san.ext -out srv.pem
    ) >"$tmp/tls.log" 2>&1
}

# jwt_conf FILE PORT ADMIN CACHE: a gateway with identity.jwt (RS256, the
# key of make_token) and one route, /jwt/, limited locally per user with
# the token's "sub"; CACHE (true/false) is identity.jwt.cache. A gateway of
# its own: identity.jwt applies to every route, so the other rows would
# look for a token too.
jwt_conf() {
    cat >"$1" <<EOF
server:
  listen: 127.0.0.1:$2
  workers: 1
  max_connections: $MAXCONN
  drain_timeout: 1s
admin:
  listen: 127.0.0.1:$3
upstream:
  keepalive: 256
log:
  level: warn
  access: off
identity:
  jwt:
    algorithms: [RS256]
    key_file: $tmp/jwt-public.pem
    cache: $4
limiters:
  huge: { algorithm: token_bucket, rate: 1000000000/s, burst: 1000000000 }
routes:
  - id: jwt
    uri: http://127.0.0.1:$BACKEND_PORT
    predicates: [ 'Path=/jwt/**' ]
    filters:
      - name: RequestRateLimiter
        args: { key: user, limiter: huge, backend: local }
EOF
}

# make_token: an RSA key pair in $tmp and, in TOKEN, an RS256 token for
# user "bench" valid for a day, made with openssl alone.
b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }
make_token() {
    local head body sig
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 \
        -out "$tmp/jwt-private.pem" 2>/dev/null || return 1
    openssl pkey -in "$tmp/jwt-private.pem" -pubout -out "$tmp/jwt-public.pem" || return 1
    head=$(printf '{"alg":"RS256","typ":"JWT"}' | b64url)
    body=$(printf '{"sub":"bench","exp":%d}' $(($(date +%s) + 86400)) | b64url)
    sig=$(printf '%s.%s' "$head" "$body" |
        openssl dgst -sha256 -sign "$tmp/jwt-private.pem" -binary | b64url)
    TOKEN=$head.$body.$sig
}

note "starting Redis, the backend, nginx, HAProxy and sluice in $tmp"
make_certs || { cat "$tmp/tls.log" >&2; die "could not make the certificates"; }

# Redis, for rows 5 and 6.
start_bg redis "${PEER[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
    --save '' --appendonly no --loglevel warning
ready redis 10 redis_up
TB_SHA=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "$(cat "$ROOT/bench/token_bucket.lua")")
case $TB_SHA in [0-9a-f]*) ;; *) die "SCRIPT LOAD failed: $TB_SHA" ;; esac

# The backend every proxy points at: nginx, 1 worker, "200 ok" on every
# path; /__status counts the requests and connections it served.
nginx_conf "$tmp/backend" 1 "" "
    server {
        listen 127.0.0.1:$BACKEND_PORT backlog=4096;
        location / { return 200 \"ok\\n\"; }
        location = /__status { stub_status; }
    }
    server {
        listen 127.0.0.1:$BACKEND_TLS_PORT ssl backlog=4096;
        ssl_certificate $tmp/tls/srv.pem;
        ssl_certificate_key $tmp/tls/srv.key;
        location / { return 200 \"ok\\n\"; }
    }"
start_nginx backend
ready backend 10 http_ok "http://127.0.0.1:$BACKEND_PORT/"

# Rows 2, 4 and 5: one nginx, 1 worker, one location per row.
LUA_MODULES="load_module $NGINX_MODULES/ndk_http_module.so;
load_module $NGINX_MODULES/ngx_http_lua_module.so;"
nginx_conf "$tmp/nginx" 1 "$LUA_MODULES" "
$(proxy_http)
$(lua_http)
    limit_req_zone \$binary_remote_addr zone=flood:1m rate=1r/s;
    limit_req_status 429;
    limit_req_log_level info;   # below error_log's level: no line per refusal
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=4096;
        location / { proxy_pass http://backend; }
        location /limit_req/ { limit_req zone=flood; proxy_pass http://backend; }
        location /lua/ {
            access_by_lua_block { require(\"bench_tb\").take(\"open:\", 1e9, 1e9) }
            proxy_pass http://backend;
        }
        location /lua_flood/ {
            access_by_lua_block { require(\"bench_tb\").take(\"flood:\", 1, 1) }
            proxy_pass http://backend;
        }
        location /tlsup/ {
            proxy_pass https://backend_tls;
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate $tmp/tls/ca.pem;
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
            proxy_ssl_session_reuse on;
        }
    }
    upstream backend_tls {
        server 127.0.0.1:$BACKEND_TLS_PORT;
        keepalive 256;
        keepalive_requests 1000000000;
    }
    server {
        listen 127.0.0.1:$NGINX_TLS_PORT ssl backlog=4096;
        ssl_certificate $tmp/tls/srv.pem;
        ssl_certificate_key $tmp/tls/srv.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / { proxy_pass http://backend; }
    }"
start_nginx nginx
ready nginx 10 http_ok "http://127.0.0.1:$NGINX_PORT/lua/"

# Row 7: the same proxy with 2 workers.
nginx_conf "$tmp/nginx2" 2 "" "
$(proxy_http)
    server {
        listen 127.0.0.1:$NGINX2_PORT backlog=4096;
        location / { proxy_pass http://backend; }
    }"
start_nginx nginx2
ready nginx2 10 http_ok "http://127.0.0.1:$NGINX2_PORT/"

# Row 3: HAProxy, 1 thread, keep-alive both ways, idle server connections
# shared between clients.
haproxy_conf() {
    cat >"$1" <<EOF
global
    nbthread 1
    maxconn $HAPROXY_MAXCONN
defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 60s
frontend bench
    bind 127.0.0.1:$2
    default_backend backend
backend backend
    server nginx 127.0.0.1:$BACKEND_PORT
EOF
}
haproxy_conf "$tmp/haproxy.cfg" "$HAPROXY_PORT"
start_bg haproxy haproxy -db -f "$tmp/haproxy.cfg"
ready haproxy 10 http_ok "http://127.0.0.1:$HAPROXY_PORT/"

# Row 6 and 7: sluice with 1 and with 2 workers; /big comes from sluice-echo.
start_bg echo "$BUILD/sluice-echo" --listen "127.0.0.1:$ECHO_PORT"
ready echo 10 http_ok "http://127.0.0.1:$ECHO_PORT/"
sluice_conf "$tmp/sluice1.yaml" "$SLUICE_PORT" "$SLUICE_ADMIN" 1 "$SLUICE_TLS_PORT"
start_bg sluice1 "$BUILD/sluice" -c "$tmp/sluice1.yaml"
ready sluice1 10 http_ok "http://127.0.0.1:$SLUICE_ADMIN/ready"
sluice_conf "$tmp/sluice2.yaml" "$SLUICE2_PORT" "$SLUICE2_ADMIN" 2
start_bg sluice2 "$BUILD/sluice" -c "$tmp/sluice2.yaml"
ready sluice2 10 http_ok "http://127.0.0.1:$SLUICE2_ADMIN/ready"

# Row 6, JWT: sluice verifying an RS256 token on every request, with its
# per-worker cache of verified tokens and without.
if want sluice_jwt || want sluice_jwt_nc; then
    make_token || die "openssl could not make the JWT rows' key and token"
    SLUICE_JWT_PORT=$(free_port); SLUICE_JWT_ADMIN=$(free_port)
    SLUICE_JWTNC_PORT=$(free_port); SLUICE_JWTNC_ADMIN=$(free_port)
    jwt_conf "$tmp/sluice-jwt.yaml" "$SLUICE_JWT_PORT" "$SLUICE_JWT_ADMIN" true
    start_bg sluice_jwt "$BUILD/sluice" -c "$tmp/sluice-jwt.yaml"
    ready sluice_jwt 10 http_ok "http://127.0.0.1:$SLUICE_JWT_ADMIN/ready"
    jwt_conf "$tmp/sluice-jwtnc.yaml" "$SLUICE_JWTNC_PORT" "$SLUICE_JWTNC_ADMIN" false
    start_bg sluice_jwt_nc "$BUILD/sluice" -c "$tmp/sluice-jwtnc.yaml"
    ready sluice_jwt_nc 10 http_ok "http://127.0.0.1:$SLUICE_JWTNC_ADMIN/ready"
    URL[sluice_jwt]=http://127.0.0.1:$SLUICE_JWT_PORT/jwt/
    URL[sluice_jwt_nc]=http://127.0.0.1:$SLUICE_JWTNC_PORT/jwt/
    WRK_HEADER[sluice_jwt]="Authorization: Bearer $TOKEN"
    WRK_HEADER[sluice_jwt_nc]="Authorization: Bearer $TOKEN"
fi

# Row 6, cluster: three cluster-enabled Redis servers joined as primaries
# without replicas (bus ports chosen free, not port + 10000), and a
# gateway whose /redis/ limiter lives there.
cluster_ok() {
    local p
    for p in "${CLUSTER_PORTS[@]}"; do
        redis-cli -p "$p" CLUSTER INFO 2>/dev/null | grep -q cluster_state:ok || return 1
    done
}
if want sluice_cluster; then
    CLUSTER_PORTS=("$(free_port)" "$(free_port)" "$(free_port)")
    nodes=""
    for i in 0 1 2; do
        p=${CLUSTER_PORTS[$i]}
        mkdir -p "$tmp/cluster$i"
        start_bg "cluster$i" "${PEER[@]}" redis-server --port "$p" --bind 127.0.0.1 \
            --cluster-enabled yes --cluster-port "$(free_port)" \
            --cluster-config-file nodes.conf --dir "$tmp/cluster$i" \
            --save '' --appendonly no --loglevel warning
        ready "cluster$i" 10 redis-cli -p "$p" PING
        nodes="$nodes${nodes:+, }127.0.0.1:$p"
    done
    redis-cli --cluster create "${CLUSTER_PORTS[@]/#/127.0.0.1:}" \
        --cluster-replicas 0 --cluster-yes >"$tmp/cluster-create.log" 2>&1 ||
        die "redis-cli --cluster create failed (see $tmp/cluster-create.log)"
    wait_until 30 "the cluster" cluster_ok || die "the cluster never settled"
    SLUICE_CL_PORT=$(free_port); SLUICE_CL_ADMIN=$(free_port)
    sluice_conf "$tmp/sluice-cluster.yaml" "$SLUICE_CL_PORT" "$SLUICE_CL_ADMIN" 1
    sed -i "s|^  url: redis://.*|  cluster: { nodes: [$nodes] }|" "$tmp/sluice-cluster.yaml"
    start_bg sluice_cluster "$BUILD/sluice" -c "$tmp/sluice-cluster.yaml"
    ready sluice_cluster 10 http_ok "http://127.0.0.1:$SLUICE_CL_ADMIN/ready"
    URL[sluice_cluster]=http://127.0.0.1:$SLUICE_CL_PORT/redis/
fi

# Row 8: a bare evhttp server answering ok, no proxying: the ceiling of an
# evhttp front end such as sluice's (bench/evhttp_ok.c).
cc -O2 -o "$tmp/evhttp_ok" "$ROOT/bench/evhttp_ok.c" $(pkg-config --cflags --libs libevent) ||
    die "cannot build bench/evhttp_ok.c"
start_bg evhttp "$tmp/evhttp_ok" "$EVHTTP_PORT"
ready evhttp 10 http_ok "http://127.0.0.1:$EVHTTP_PORT/"

URL[direct]=http://127.0.0.1:$BACKEND_PORT/
URL[nginx]=http://127.0.0.1:$NGINX_PORT/
URL[haproxy]=http://127.0.0.1:$HAPROXY_PORT/
URL[limit_req]=http://127.0.0.1:$NGINX_PORT/limit_req/
URL[lua]=http://127.0.0.1:$NGINX_PORT/lua/
URL[lua_flood]=http://127.0.0.1:$NGINX_PORT/lua_flood/
URL[sluice]=http://127.0.0.1:$SLUICE_PORT/plain/
URL[sluice_redis]=http://127.0.0.1:$SLUICE_PORT/redis/
URL[sluice_hot]=http://127.0.0.1:$SLUICE_PORT/hot/
URL[sluice_local]=http://127.0.0.1:$SLUICE_PORT/local/
URL[sluice_flood]=http://127.0.0.1:$SLUICE_PORT/flood/
URL[sluice_2w]=http://127.0.0.1:$SLUICE2_PORT/plain/
URL[nginx_2w]=http://127.0.0.1:$NGINX2_PORT/
URL[evhttp]=http://127.0.0.1:$EVHTTP_PORT/
URL[nginx_tls_up]=http://127.0.0.1:$NGINX_PORT/tlsup/
URL[sluice_tls_up]=http://127.0.0.1:$SLUICE_PORT/tlsup/
URL[nginx_tls_in]=https://127.0.0.1:$NGINX_TLS_PORT/
URL[sluice_tls_in]=https://127.0.0.1:$SLUICE_TLS_PORT/plain/

for r in "${ROW_IDS[@]}"; do
    want "$r" || continue
    ROW_LIST+=("$r")
    hdr=(); [ -n "${WRK_HEADER[$r]:-}" ] && hdr=(-H "${WRK_HEADER[$r]}")
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert "$tmp/tls/ca.pem" "${hdr[@]}" "${URL[$r]}")
    case $code in 200 | 429) ;; *) die "${LABEL[$r]}: ${URL[$r]} answered $code" ;; esac
done

# ---------------------------------------------------------------- header

say "sluice comparative benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
# Where the build comes from: its CMake cache names the source tree.
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
btype=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
commit=$(git -C "${src:-/nonexistent}" log -1 --format='%h %s' 2>/dev/null | cut -c1-60)
[ -n "$(git -C "${src:-/nonexistent}" status --porcelain --untracked-files=no 2>/dev/null)" ] &&
    commit="$commit (with uncommitted changes)"
say "sluice:  $("$BUILD/sluice" --version 2>&1 | head -n 1), $BUILD (${btype:-unknown build type})"
[ -n "$commit" ] && say "         built from $src at $commit"
say "others:  $(nginx -v 2>&1 | sed 's/.*: //'), $(haproxy -v | head -n 1 | cut -d' ' -f1-3)," \
    "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), $(wrk -v 2>&1 | head -n 1 | cut -d' ' -f1-2)"
say "machine: $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), Linux $(uname -r)"
say "CPU affinity: none set; every process may run on CPUs $(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)."
say "  wrk (1 thread), the backend nginx (1 worker), Redis and the proxy under test"
say "  all share these $(nproc) CPUs, so read the req/s as relative, and the counted"
say "  figures below as the ones that do not depend on the machine."
if [ "$PEERS" = batch ]; then
    say "scheduling: wrk, the backend and Redis under SCHED_BATCH (PEERS=batch): their"
    say "  wakeups do not preempt the proxy; the proxies run under the default policy."
else
    say "scheduling: every process under the default policy (PEERS=normal)."
fi
say "runs:    wrk -t1, keep-alive, GET of a 3-byte \"ok\" body; $DURATION per run after a $WARMUP warm-up;"
say "         connections: $CONNS; REPS=$REPS repetitions, interleaved (repetition > connections > row)"

# ---------------------------------------------------------------- timed runs

RESULTS=$tmp/results
: >"$RESULTS"
CPU_RESULTS=$tmp/cpu
: >"$CPU_RESULTS"

# serving_pids ROW: the processes that serve ROW's requests (nginx's
# workers, HAProxy, a sluice with all its threads, the bare evhttp).
serving_pids() {
    case $1 in
    direct) children "${PID[backend]}" ;;
    nginx | limit_req | lua | lua_flood | nginx_tls_up | nginx_tls_in) children "${PID[nginx]}" ;;
    nginx_2w) children "${PID[nginx2]}" ;;
    haproxy) echo "${PID[haproxy]}" ;;
    sluice_2w) echo "${PID[sluice2]}" ;;
    sluice_jwt | sluice_jwt_nc | sluice_cluster) echo "${PID[$1]}" ;;
    evhttp) echo "${PID[evhttp]}" ;;
    *) echo "${PID[sluice1]}" ;;
    esac
}
# redis_pids: every Redis server the benchmark started.
redis_pids() {
    local name
    for name in "${!PID[@]}"; do
        case $name in redis | cluster[0-9]) echo "${PID[$name]}" ;; esac
    done
}
# sched_snap GROUP PID...: one line per thread of each PID: GROUP, thread
# id, nanoseconds run on a CPU and nanoseconds spent runnable, waiting for
# one (/proc/PID/task/TID/schedstat). A thread gone meanwhile is skipped.
sched_snap() {
    local group=$1 pid f files=(); shift
    for pid in "$@"; do
        for f in /proc/"$pid"/task/*/schedstat; do [ -r "$f" ] && files+=("$f"); done
    done
    [ ${#files[@]} -gt 0 ] || return 0
    # Files read with getline: a missing one is skipped, not fatal (mawk).
    awk -v g="$group" 'BEGIN {
        for (i = 1; i < ARGC; i++) {
            if ((getline line < ARGV[i]) > 0) {
                split(ARGV[i], path, "/"); split(line, v, " ")
                print g, path[5], v[1], v[2]
            }
            close(ARGV[i])
        }
    }' "${files[@]}"
}
# cpu_snap ROW: the row's serving threads, Redis's and the backend's,
# the machine's idle time (all online CPUs) and the clock, in ns.
cpu_snap() {
    # shellcheck disable=SC2046 # one argument per process
    sched_snap proxy $(serving_pids "$1")
    # shellcheck disable=SC2046
    sched_snap redis $(redis_pids)
    # shellcheck disable=SC2046
    [ "$1" = direct ] || sched_snap backend $(children "${PID[backend]}")
    awk -v hz="$(getconf CLK_TCK)" '/^cpu / { printf "idle 0 %.0f 0\n", ($5 + $6) * 1e9 / hz }' /proc/stat
    echo "wall 0 $(date +%s%N) 0"
}
# The CPUs /proc/stat's idle time is summed over.
ONLINE_CPUS=$(grep -c '^cpu[0-9]' /proc/stat)

# run_row ROW CONNS REP: one warm-up and one measured wrk run.
run_row() {
    local row=$1 c=$2 rep=$3 out=$tmp/wrk.$1.$2.$3 line rc req errs HDR
    wrk_header "$row"
    fg_run wrk "${PEER[@]}" wrk -t1 -c"$c" -d"$WARMUP" "${HDR[@]}" "${URL[$row]}" >"$out.warmup" 2>&1 ||
        { fail "${LABEL[$row]} warm-up, $c connections: wrk exited $?"; return; }
    cpu_snap "$row" >"$out.cpu0"
    fg_run wrk "${PEER[@]}" wrk -t1 -c"$c" -d"$DURATION" --latency -s "$ROOT/bench/report.lua" "${HDR[@]}" "${URL[$row]}" >"$out" 2>&1
    rc=$?
    cpu_snap "$row" >"$out.cpu1"
    line=$(sed -n 's/^BENCH //p' "$out")
    req=$(field requests "$line")
    if [ $rc -ne 0 ] || [ -z "$req" ] || [ "$req" -eq 0 ]; then
        fail "${LABEL[$row]}, $c connections, rep $rep: wrk exited $rc, ${req:-no} requests"
        sed 's/^/   /' "$out" >&2
        return
    fi
    errs=$(($(field connect "$line") + $(field read "$line") + $(field write "$line") + $(field timeout "$line")))
    if [ "$errs" -gt $((req / 10)) ]; then
        fail "${LABEL[$row]}, $c connections, rep $rep: $errs socket errors for $req requests"
    fi
    printf '%s %s %s %s %s %s %s %s %s\n' "$row" "$c" "$rep" "$req" \
        "$(field duration_us "$line")" "$(field non2xx "$line")" "$errs" \
        "$(field p50_us "$line")" "$(field p99_us "$line")" >>"$RESULTS"
    # row conns rep requests wall_ns idle_ns, then run and wait ns of
    # each group's threads seen before and after the run, or "- -"
    awk -v head="$row $c $rep $req" '
        FNR == NR { run0[$1, $2] = $3; wait0[$1, $2] = $4; next }
        ($1, $2) in run0 {
            seen[$1] = 1
            run[$1] += $3 - run0[$1, $2]; wait[$1] += $4 - wait0[$1, $2]
        }
        END {
            printf "%s %.0f %.0f", head, run["wall"], run["idle"]
            split("proxy redis backend", g, " ")
            for (i = 1; i <= 3; i++)
                if (g[i] in seen) printf " %.0f %.0f", run[g[i]], wait[g[i]]
                else printf " - -"
            printf "\n"
        }' "$out.cpu0" "$out.cpu1" >>"$CPU_RESULTS"
    note "rep $rep/$REPS, $c conns, ${LABEL[$row]}: $(awk -v r="$req" -v d="$(field duration_us "$line")" 'BEGIN { printf "%.0f", r / (d / 1e6) }') req/s"
}

nruns=$((REPS * $(echo "$CONNS" | wc -w) * ${#ROW_LIST[@]}))
note "$nruns timed runs of $DURATION + $WARMUP warm-up: about" \
    "$(((nruns * ($(seconds_of "$DURATION") + $(seconds_of "$WARMUP")) + 59) / 60)) min"
for rep in $(seq 1 "$REPS"); do
    for c in $CONNS; do
        for row in "${ROW_LIST[@]}"; do
            run_row "$row" "$c" "$rep"
        done
    done
done

# The median of a[1..n] (sorts a), for the awk programs of the summaries.
AWK_MEDIAN='
    function median(a, n,    i, j, t) {
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }'
# Medians over the repetitions, per row and connection count:
# row conns rps_median rps_min rps_max p50_us p99_us non2xx_percent errors
summarize() {
    awk "$AWK_MEDIAN"'
    {
        k = $1 " " $2; n = ++cnt[k]
        rps[k, n] = $4 / ($5 / 1e6); p50[k, n] = $8; p99[k, n] = $9
        req[k] += $4; bad[k] += $6; err[k] += $7
    }
    END {
        for (k in cnt) {
            n = cnt[k]
            for (i = 1; i <= n; i++) { a[i] = rps[k, i]; b[i] = p50[k, i]; c[i] = p99[k, i] }
            lo = hi = a[1]
            for (i = 1; i <= n; i++) { if (a[i] < lo) lo = a[i]; if (a[i] > hi) hi = a[i] }
            printf "%s %.0f %.0f %.0f %.0f %.0f %.2f %d\n", k, median(a, n), lo, hi,
                median(b, n), median(c, n), 100 * bad[k] / req[k], err[k]
        }
    }' "$RESULTS"
}

declare -A MED MIN MAX P50 P99 BAD ERR
while read -r row c med lo hi p50 p99 bad err; do
    MED[$row,$c]=$med; MIN[$row,$c]=$lo; MAX[$row,$c]=$hi
    P50[$row,$c]=$p50; P99[$row,$c]=$p99; BAD[$row,$c]=$bad; ERR[$row,$c]=$err
done < <(summarize)

ms() { awk -v u="$1" 'BEGIN { printf "%.2fms", u / 1000 }'; }

say ""
say "== Throughput and latency: median of $REPS runs (min-max); ratio to row 2 (nginx proxy) at the same connections"
say ""
printf '%-2s %-22s %5s  %-24s %9s %9s %8s %8s\n' "#" "row" "conns" "req/s median (min-max)" "p50" "p99" "non-2xx" "/ row 2"
for c in $CONNS; do
    for row in "${ROW_LIST[@]}"; do
        k=$row,$c
        if [ -z "${MED[$k]:-}" ]; then
            printf '%-2s %-22s %5s  %s\n' "${NUM[$row]}" "${LABEL[$row]}" "$c" "(failed)"
            continue
        fi
        printf '%-2s %-22s %5s  %-24s %9s %9s %7s%% %8s\n' "${NUM[$row]}" "${LABEL[$row]}" "$c" \
            "${MED[$k]} (${MIN[$k]}-${MAX[$k]})" "$(ms "${P50[$k]}")" "$(ms "${P99[$k]}")" \
            "${BAD[$k]}" "$(ratio "${MED[$k]}" "${MED[nginx,$c]:-}")"
    done
done

# ratio_row LABEL A B FIGURE: row A's figure over row B's at every
# connection count; FIGURE ROW CONNS prints a row's figure ("" or "-"
# when it has none).
ratio_row() {
    local label=$1 a=$2 b=$3 figure=$4 c out=""
    want "$a" && want "$b" || return 0
    for c in $CONNS; do
        out="$out$(printf '%8s' "$(ratio "$("$figure" "$a" "$c")" "$("$figure" "$b" "$c")")")"
    done
    printf '%-48s%s\n' "$label" "$out"
}
median_rps() { printf '%s' "${MED[$1,$2]:-}"; }
# ratio_line LABEL A B: the ratio of rows A and B's median req/s.
ratio_line() { ratio_row "$1" "$2" "$3" median_rps; }
say ""
printf '%-48s' "Ratios of median req/s, at connections:"; for c in $CONNS; do printf '%8s' "$c"; done; printf '\n'
ratio_line "  sluice / nginx proxy" sluice nginx
ratio_line "  sluice / haproxy" sluice haproxy
ratio_line "  sluice redis / nginx proxy" sluice_redis nginx
ratio_line "  sluice redis / nginx+lua+redis" sluice_redis lua
ratio_line "  sluice hot, leases / sluice redis" sluice_hot sluice_redis
ratio_line "  sluice cluster / sluice redis" sluice_cluster sluice_redis
ratio_line "  sluice local / nginx proxy" sluice_local nginx
ratio_line "  sluice jwt, cached / sluice local" sluice_jwt sluice_local
ratio_line "  sluice jwt, no cache / sluice jwt, cached" sluice_jwt_nc sluice_jwt
ratio_line "  sluice flood / nginx limit_req flood" sluice_flood limit_req
ratio_line "  sluice flood / nginx+lua+redis flood" sluice_flood lua_flood
ratio_line "  nginx+lua+redis flood / nginx limit_req flood" lua_flood limit_req
ratio_line "  sluice 2 workers / sluice" sluice_2w sluice
ratio_line "  nginx proxy 2 workers / nginx proxy" nginx_2w nginx
ratio_line "  bare evhttp (no proxying) / nginx proxy" evhttp nginx
ratio_line "  sluice / bare evhttp" sluice evhttp

# CPU per request over the timed runs, medians over the repetitions:
# row conns proxy_us proxy_waiting_% redis_us backend_us machine_idle_%
# machine_us, "-" for a group with no thread seen. machine_us is the busy
# time of every online CPU (every process, the kernel's work included)
# per request.
cpu_summary() {
    awk -v ncpu="$ONLINE_CPUS" "$AWK_MEDIAN"'
    # put(NAME, VALUE): one repetition'"'"'s figure, unless it is missing
    function put(m, v) { if (v != "-") { n = ++cnt[k, m]; val[k, m, n] = v } }
    function med(m, fmt,    i, a) {
        if (!((k, m) in cnt)) return "-"
        for (i = 1; i <= cnt[k, m]; i++) a[i] = val[k, m, i]
        return sprintf(fmt, median(a, cnt[k, m]))
    }
    $4 > 0 && $5 > 0 {
        k = $1 " " $2; keys[k] = 1
        put("px", $7 == "-" ? "-" : $7 / 1e3 / $4)
        put("pw", $8 == "-" ? "-" : 100 * $8 / $5)
        put("rd", $9 == "-" ? "-" : $9 / 1e3 / $4)
        put("bk", $11 == "-" ? "-" : $11 / 1e3 / $4)
        put("id", 100 * $6 / ($5 * ncpu))
        put("mc", ($5 * ncpu - $6) / 1e3 / $4)
    }
    END {
        for (k in keys)
            print k, med("px", "%.1f"), med("pw", "%.0f"), med("rd", "%.1f"), med("bk", "%.1f"), med("id", "%.0f"), med("mc", "%.1f")
    }' "$CPU_RESULTS"
}
declare -A CPU_PX CPU_WAIT CPU_RD CPU_BK CPU_IDLE CPU_MC
while read -r row c px pw rd bk id mc; do
    CPU_PX[$row,$c]=$px; CPU_WAIT[$row,$c]=$pw; CPU_RD[$row,$c]=$rd
    CPU_BK[$row,$c]=$bk; CPU_IDLE[$row,$c]=$id; CPU_MC[$row,$c]=$mc
done < <(cpu_summary)

pct() { if [ "$1" = - ]; then echo -; else echo "$1%"; fi; }
# cpu_sum PROXY REDIS: the two together; "-" without the proxy's figure.
cpu_sum() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-") print "-"; else printf "%.1f", a + (b == "-" ? 0 : b) }'
}

say ""
say "== CPU per request over the timed runs: median of $REPS runs (/proc/PID/task/*/schedstat)"
say "   proxy = the row's serving process, all its threads; waiting = time its threads were runnable"
say "   but not running, as a share of the run (another process had the CPU); Redis = every Redis"
say "   server of the benchmark; backend = its nginx worker; idle = the machine's idle share;"
say "   machine = the busy time of all $ONLINE_CPUS CPUs per request (every process, wrk and the kernel included)"
say ""
printf '%-2s %-22s %5s  %10s %8s %10s %12s %10s %6s %10s\n' "#" "row" "conns" "proxy us" "waiting" "Redis us" "proxy+Redis" "backend us" "idle" "machine us"
for c in $CONNS; do
    for row in "${ROW_LIST[@]}"; do
        k=$row,$c
        [ -n "${CPU_PX[$k]:-}" ] || continue
        printf '%-2s %-22s %5s  %10s %8s %10s %12s %10s %6s %10s\n' "${NUM[$row]}" "${LABEL[$row]}" "$c" \
            "${CPU_PX[$k]}" "$(pct "${CPU_WAIT[$k]}")" "${CPU_RD[$k]}" \
            "$(cpu_sum "${CPU_PX[$k]}" "${CPU_RD[$k]}")" \
            "${CPU_BK[$k]}" "$(pct "${CPU_IDLE[$k]}")" "${CPU_MC[$k]}"
    done
done
# The proxy's and Redis's CPU per request of a row, together.
cpu_per_request() { cpu_sum "${CPU_PX[$1,$2]:--}" "${CPU_RD[$1,$2]:--}"; }
say ""
printf '%-48s' "CPU per request, proxy + Redis, at connections:"; for c in $CONNS; do printf '%8s' "$c"; done; printf '\n'
ratio_row "  nginx+lua+redis / sluice redis" lua sluice_redis cpu_per_request
ratio_row "  nginx+lua+redis flood / sluice flood" lua_flood sluice_flood cpu_per_request
ratio_row "  nginx proxy / sluice" nginx sluice cpu_per_request
# The whole machine's: with no idle time, the ratio of req/s these two
# rows' CPU allows on this machine.
machine_per_request() { printf '%s' "${CPU_MC[$1,$2]:-}"; }
printf '%-48s' "CPU per request, whole machine, at connections:"; for c in $CONNS; do printf '%8s' "$c"; done; printf '\n'
ratio_row "  nginx+lua+redis / sluice redis" lua sluice_redis machine_per_request
ratio_row "  nginx proxy / sluice redis" nginx sluice_redis machine_per_request
ratio_row "  nginx proxy / sluice" nginx sluice machine_per_request

# Footnotes: rows that should never refuse but answered non-2xx, socket
# errors, and sluice decisions that were not Redis's (failure policy).
for c in $CONNS; do
    for row in "${ROW_LIST[@]}"; do
        k=$row,$c
        [ -n "${MED[$k]:-}" ] || continue
        case $FLOOD_ROWS in *" $row "*) ;; *)
            awk -v b="${BAD[$k]}" 'BEGIN { exit !(b > 0) }' &&
                say "note: ${LABEL[$row]} at $c connections: ${BAD[$k]}% non-2xx answers" ;;
        esac
        [ "${ERR[$k]}" -gt 0 ] && say "note: ${LABEL[$row]} at $c connections: ${ERR[$k]} socket errors (wrk)"
    done
done
for admin in "$SLUICE_ADMIN" "$SLUICE2_ADMIN"; do
    curl -s --max-time 2 "http://127.0.0.1:$admin/metrics" |
        grep '^sluice_ratelimit_decisions_total' | grep -E 'result="(fallback|policy)_' |
        awk -v a="$admin" '$NF > 0 { print "note: sluice (admin " a "): " $0 }'
done
grep -h 'redis' "$tmp/nginx/error.log" 2>/dev/null | head -n 3 | sed 's/^/note: nginx error.log: /'

# ---------------------------------------------------------------- counted figures

backend_counts() {     # accepted connections and requests served by the backend
    curl -s --max-time 2 "http://127.0.0.1:$BACKEND_PORT/__status" | awk 'NR == 3 { print $1, $3 }'
}

# counted ROW N [URL]: wrk over COUNT_CONNS connections until N responses;
# sets SERVED (requests the backend served meanwhile) and OPENED (upstream
# connections the proxy opened). Both leave out the /__status reads.
counted() {
    local row=$1 n=$2 url=${3:-${URL[$1]}} a0 r0 a1 r1 out=$tmp/count.$1 HDR
    wrk_header "$row"
    read -r a0 r0 < <(backend_counts)
    local rc=0 marker=$tmp/count.done pid
    rm -f "$marker"
    wrk -t1 -c"$COUNT_CONNS" -d600s --timeout 30s -s "$ROOT/bench/count.lua" \
        "${HDR[@]}" "$url" -- "$n" "$marker" >"$out" 2>&1 &
    pid=$!; PID[wrk]=$pid
    # count.lua creates the marker at the N-th response: end wrk then
    # (again until it is gone: a signal may reach its stopping thread).
    while kill -0 "$pid" 2>/dev/null; do
        [ -e "$marker" ] && kill -INT "$pid" 2>/dev/null
        sleep 0.05
    done
    wait "$pid" || rc=$?
    unset "PID[wrk]"
    read -r a1 r1 < <(backend_counts)
    SERVED=$((r1 - r0 - 1)); OPENED=$((a1 - a0 - 1))
    if [ $rc -ne 0 ]; then
        fail "${LABEL[$row]}: counted run: wrk exited $rc"; sed 's/^/   /' "$out" >&2; return 1
    fi
}
# counted_proxied ROW N [URL]: counted, for rows that forward every request.
counted_proxied() {
    counted "$@" || return 1
    [ "$SERVED" -gt 0 ] || { fail "${LABEL[$1]}: counted run: the backend served nothing"; return 1; }
}

# strace_row ROW PID...: system calls per proxied request, strace -c -f
# attached to the proxy's serving processes around a counted run.
strace_row() {
    local row=$1 out=$tmp/strace.$1 args=() p; shift
    for p in "$@"; do args+=(-p "$p"); done
    counted "$row" 1000 || return      # warm-up: fill the connection pools again
    start_bg strace strace -c -f -o "$out" "${args[@]}"
    if ! wait_until 10 "strace to attach" attached "$tmp/strace.log" $#; then
        stop_bg strace INT; fail "strace did not attach to ${LABEL[$row]}"; return
    fi
    counted_proxied "$row" "$STRACE_N"
    local ok=$?
    stop_bg strace INT
    [ $ok -eq 0 ] || return
    # % time, seconds, usecs/call, calls, [errors], syscall
    awk -v n="$SERVED" -v label="${LABEL[$row]}" -v opened="$OPENED" '
        /^%|^-|^$/ { next }
        $NF == "total" { total = $4; errs = (NF == 6) ? $5 : 0; next }
        { name[++m] = $NF; calls[m] = $4 }
        END {
            top = ""
            for (i = 1; i <= m && i <= 40; i++) {     # sort by calls, show the top 8
                for (j = i + 1; j <= m; j++) if (calls[j] > calls[i]) {
                    t = calls[i]; calls[i] = calls[j]; calls[j] = t
                    t = name[i]; name[i] = name[j]; name[j] = t
                }
                if (i <= 8 && calls[i] / n >= 0.01)
                    top = top sprintf("%s%s %.2f", top == "" ? "" : ", ", name[i], calls[i] / n)
            }
            printf "  %-22s %7.2f %7.2f %7d %6d  %s\n", label, total / n, errs / n, n, opened, top
        }' "$out"
}

want nginx || want haproxy || want lua || want sluice || want sluice_redis || want sluice_local ||
    NO_STRACE_ROWS=1
[ -z "${NO_STRACE_ROWS:-}" ] && {
say ""
say "== System calls per proxied request: strace -c -f on the proxy, a counted run of $STRACE_N requests"
say "   over $COUNT_CONNS connections (requests = what the backend served; failed = calls that returned an"
say "   error, EAGAIN included; new upstream = connections the backend accepted meanwhile)"
say ""
printf '  %-22s %7s %7s %7s %6s  %s\n' "row" "calls" "failed" "requests" "new up" "top calls per request"
# shellcheck disable=SC2046 # one argument per nginx worker
want nginx && strace_row nginx $(children "${PID[nginx]}")
want haproxy && strace_row haproxy "${PID[haproxy]}"
# shellcheck disable=SC2046
want lua && strace_row lua $(children "${PID[nginx]}")
want sluice && strace_row sluice "${PID[sluice1]}"
want sluice_redis && strace_row sluice_redis "${PID[sluice1]}"
want sluice_local && strace_row sluice_local "${PID[sluice1]}"
}

# Redis commands per decision: INFO commandstats (Redis 7 counts the
# commands a script calls too) and INFO cpu around a counted run.
redis_snapshot() {
    redis-cli -p "$REDIS_PORT" INFO all | tr -d '\r' | awk -F'[:=,]' '
        /^cmdstat_/ { sub(/^cmdstat_/, "", $1); print $1, $3 }
        /^used_cpu_(sys|user):/ { cpu += $2 }
        /^total_connections_received:/ { print "connections", $2 }
        END { printf "cpu_us %.0f\n", cpu * 1e6 }'
}
# The decisions a sluice sent to Redis: its histogram of script call
# times counts one per call, whether the call went alone or in a batch.
sluice_calls() {
    curl -s --max-time 5 "http://127.0.0.1:$1/metrics" |
        awk '/^sluice_redis_duration_seconds_count/ { print "decisions", $2 }'
}
# redis_row ROW [ADMIN]: with ADMIN (a sluice's admin port), decisions are
# the calls sluice made; without, one script command is one decision.
redis_row() {
    local row=$1 admin=${2:-} before=$tmp/redis.$1.0 after=$tmp/redis.$1.1
    counted "$row" 1000 || return      # warm-up: fill the connection pools again
    { redis_snapshot; [ -n "$admin" ] && sluice_calls "$admin"; } >"$before"
    counted "$row" "$REDIS_N" || return
    { redis_snapshot; [ -n "$admin" ] && sluice_calls "$admin"; } >"$after"
    awk -v label="${LABEL[$row]}" '
        FNR == NR { was[$1] = $2; next }
        { d[$1] = $2 - was[$1] }
        END {
            scripts = d["evalsha"] + d["eval"]      # script commands: calls or batches
            n = ("decisions" in d) ? d["decisions"] : scripts
            if (n <= 0 || scripts <= 0) { printf "  %-22s no script calls (for sluice: every refusal came from its over-limit cache)\n", label; exit }
            # the script call first, then what it ran, in the usual order
            split("evalsha eval time hmget hget get hset hmset set incrby pexpire expire", order, " ")
            for (i = 1; i in order; i++) rank[order[i]] = i
            for (k in d) {
                if (k == "info" || k == "connections" || k == "cpu_us" || k == "decisions" || d[k] <= 0) continue
                all += d[k]
                if (d[k] / n < 0.01) continue
                r = (k in rank) ? rank[k] : 99
                item[r] = item[r] sprintf("%s%s %.2f", item[r] == "" ? "" : ", ", k, d[k] / n)
            }
            for (r = 1; r <= 99; r++) if (r in item) list = list (list == "" ? "" : ", ") item[r]
            printf "  %-22s %7d %8.2f %8.2f %8.1f %6d  %s\n", label, n, n / scripts, all / n,
                d["cpu_us"] / n, d["connections"] - 1, list
        }' "$before" "$after"
}

# hot_row ROW: script calls per request of a row with leases, where most
# requests make none.
hot_row() {
    local row=$1 before=$tmp/redis.$1.0 after=$tmp/redis.$1.1
    counted "$row" 1000 || return
    redis_snapshot >"$before"
    counted "$row" "$REDIS_N" || return
    redis_snapshot >"$after"
    awk -v label="${LABEL[$row]}" -v reqs="$REDIS_N" '
        FNR == NR { was[$1] = $2; next }
        { d[$1] = $2 - was[$1] }
        END {
            n = d["evalsha"] + d["eval"]
            printf "  %-22s %d script calls (takes and returns) for %d requests: %.4f per request\n",
                label, n, reqs, n / reqs
        }' "$before" "$after"
}

want lua || want lua_flood || want sluice_redis || want sluice_flood || want sluice_hot || NO_REDIS_ROWS=1
[ -z "${NO_REDIS_ROWS:-}" ] && {
say ""
say "== Redis per rate-limit decision: INFO commandstats and INFO cpu around a counted run of $REDIS_N requests"
say "   (decisions = script calls: EVALSHA + EVAL for nginx+Lua, sluice's own count of its calls, which"
say "   travel in batches; per batch = decisions per script command; commands include those the script"
say "   ran; CPU = Redis user + sys; new conns = connections Redis accepted meanwhile)"
say ""
printf '  %-22s %7s %8s %8s %8s %6s  %s\n' "row" "decisions" "per batch" "commands" "CPU us" "new" "commands per decision"
want lua && redis_row lua
want lua_flood && redis_row lua_flood
want sluice_redis && redis_row sluice_redis "$SLUICE_ADMIN"
want sluice_hot && hot_row sluice_hot
want sluice_flood && redis_row sluice_flood "$SLUICE_ADMIN"
}

# ---------------------------------------------------------------- slow figures

# callgrind_row ROW NAME URL: instructions per proxied request of the
# process NAME (running under callgrind): zero the counters, counted run of
# CALLGRIND_N requests, dump, divide the dump's total Ir by the requests.
cg() { callgrind_control --vgdb-prefix="$tmp/vgdb" "$@"; }
callgrind_row() {
    local row=$1 name=$2 url=$3 pid=${PID[$2]} dump ir
    counted "$row" 200 "$url"           # warm-up: pools, caches, lazy set-up
    cg -z "$pid" >/dev/null 2>&1 || { fail "callgrind_control -z ${LABEL[$row]}"; return; }
    counted_proxied "$row" "$CALLGRIND_N" "$url" || return
    cg -d "$pid" >/dev/null 2>&1 || { fail "callgrind_control -d ${LABEL[$row]}"; return; }
    dump=$(ls -t "$tmp/cg.$name".* 2>/dev/null | head -n 1)
    ir=$(awk '/^(totals|summary):/ { print $2; exit }' "$dump" 2>/dev/null)
    [ -n "$ir" ] || { fail "no callgrind totals for ${LABEL[$row]}"; return; }
    rm -f "$dump"
    awk -v label="${LABEL[$row]}" -v ir="$ir" -v n="$SERVED" \
        'BEGIN { printf "  %-22s %10.0f %8d %14.0f\n", label, ir / n, n, ir }'
}
valgrind_bg() {      # valgrind_bg NAME COMMAND...: NAME under callgrind
    local name=$1; shift
    start_bg "$name" valgrind --tool=callgrind --vgdb-prefix="$tmp/vgdb" \
        --callgrind-out-file="$tmp/cg.$name.%p" "$@"
}

if [ "$SKIP_SLOW" != 1 ]; then
    say ""
    say "== Instructions per proxied request: callgrind (Ir) of the proxy alone, a counted run of"
    say "   $CALLGRIND_N requests over $COUNT_CONNS connections after a warm-up, counters zeroed before it"
    say ""
    printf '  %-22s %10s %8s %14s\n' "row" "Ir/request" "requests" "Ir"
    if want sluice || want sluice_redis || want sluice_local; then
        CG_PORT=$(free_port); CG_ADMIN=$(free_port)
        sluice_conf "$tmp/sluice-cg.yaml" "$CG_PORT" "$CG_ADMIN" 1
        valgrind_bg cg_sluice "$BUILD/sluice" -c "$tmp/sluice-cg.yaml"
        ready cg_sluice 120 http_ok "http://127.0.0.1:$CG_ADMIN/ready"
        want sluice && callgrind_row sluice cg_sluice "http://127.0.0.1:$CG_PORT/plain/"
        want sluice_redis && callgrind_row sluice_redis cg_sluice "http://127.0.0.1:$CG_PORT/redis/"
        want sluice_local && callgrind_row sluice_local cg_sluice "http://127.0.0.1:$CG_PORT/local/"
        stop_bg cg_sluice
    fi
    for row in sluice_jwt sluice_jwt_nc; do
        want "$row" || continue
        CG_PORT=$(free_port); CG_ADMIN=$(free_port)
        cache=true; [ "$row" = sluice_jwt_nc ] && cache=false
        jwt_conf "$tmp/$row-cg.yaml" "$CG_PORT" "$CG_ADMIN" "$cache"
        valgrind_bg "cg_$row" "$BUILD/sluice" -c "$tmp/$row-cg.yaml"
        ready "cg_$row" 120 http_ok "http://127.0.0.1:$CG_ADMIN/ready"
        callgrind_row "$row" "cg_$row" "http://127.0.0.1:$CG_PORT/jwt/"
        stop_bg "cg_$row"
    done
    if want nginx || want lua; then
        CG_PORT=$(free_port)
        nginx_conf "$tmp/cg_nginx" 1 "$LUA_MODULES" "
$(proxy_http)
$(lua_http)
    server {
        listen 127.0.0.1:$CG_PORT;
        location / { proxy_pass http://backend; }
        location /lua/ {
            access_by_lua_block { require(\"bench_tb\").take(\"cg:\", 1e9, 1e9) }
            proxy_pass http://backend;
        }
    }"
        valgrind_bg cg_nginx nginx -p "$tmp/cg_nginx" -c "$tmp/cg_nginx/nginx.conf" \
            -e "$tmp/cg_nginx/error.log" -g "daemon off; master_process off;"
        ready cg_nginx 120 http_ok "http://127.0.0.1:$CG_PORT/"
        want nginx && callgrind_row nginx cg_nginx "http://127.0.0.1:$CG_PORT/"
        want lua && callgrind_row lua cg_nginx "http://127.0.0.1:$CG_PORT/lua/"
        stop_bg cg_nginx
    fi
    if want haproxy; then
        CG_PORT=$(free_port)
        haproxy_conf "$tmp/cg_haproxy.cfg" "$CG_PORT"
        valgrind_bg cg_haproxy haproxy -db -f "$tmp/cg_haproxy.cfg"
        ready cg_haproxy 120 http_ok "http://127.0.0.1:$CG_PORT/"
        callgrind_row haproxy cg_haproxy "http://127.0.0.1:$CG_PORT/"
        stop_bg cg_haproxy
    fi

    # Resident memory with IDLE_CONNS idle keep-alive clients, each having
    # had one proxied request.
    idle_row() {     # idle_row ROW PID URL [N]
        local row=$1 pid=$2 url=$3 n=${4:-$IDLE_CONNS} port path before with label
        port=${url#http://127.0.0.1:}; path=/${port#*/}; port=${port%%/*}
        before=$(rss_kib "$pid")
        start_bg idle python3 "$ROOT/bench/idle.py" "$port" "$path" "$n"
        if ! wait_until 300 "$n idle connections" grep -q '^ready' "$tmp/idle.log"; then
            fail "idle connections to ${LABEL[$row]}: $(tail -n 1 "$tmp/idle.log")"
            stop_bg idle; return
        fi
        with=$(rss_kib "$pid")
        stop_bg idle
        label=${LABEL[$row]}; [ "$n" = "$IDLE_CONNS" ] || label="$label ($n)"
        awk -v label="$label" -v b="$before" -v w="$with" -v n="$n" \
            'BEGIN { printf "  %-22s %10.1f %10.1f %10.2f\n", label, b / 1024, w / 1024, (w - b) / n }'
    }
    say ""
    say "== Resident memory (VmRSS) with $IDLE_CONNS idle keep-alive client connections, one request each"
    say "   (nginx: its worker process; after the timed runs)"
    say ""
    printf '  %-22s %10s %10s %10s\n' "row" "MiB before" "MiB with" "KiB/conn"
    want sluice && idle_row sluice "${PID[sluice1]}" "${URL[sluice]}"
    want nginx && idle_row nginx "$(first_child "${PID[nginx]}")" "${URL[nginx]}"
    if want haproxy; then
        # HAProxy reserves 2 descriptors per connection: past the open-file
        # limit, as many connections as its maxconn allows, and a note.
        n=$IDLE_CONNS
        if [ "$HAPROXY_MAXCONN" -lt $((n + 16)) ]; then
            n=$((HAPROXY_MAXCONN - 16))
            hanote="  (haproxy: $n connections, all its maxconn $HAPROXY_MAXCONN allows under the open-file limit $NOFILE)"
        fi
        idle_row haproxy "${PID[haproxy]}" "${URL[haproxy]}" "$n"
        [ -n "${hanote:-}" ] && say "$hanote"
    fi

    # Peak memory while sluice streams STREAM_BYTES from sluice-echo to a
    # client reading at STREAM_RATE: a sluice of its own (1 worker, one
    # small request first), VmHWM reset through clear_refs just before.
    if want sluice; then
        ST_PORT=$(free_port); ST_ADMIN=$(free_port)
        sluice_conf "$tmp/sluice-stream.yaml" "$ST_PORT" "$ST_ADMIN" 1
        start_bg sluice_stream "$BUILD/sluice" -c "$tmp/sluice-stream.yaml"
        ready sluice_stream 10 http_ok "http://127.0.0.1:$ST_ADMIN/ready"
        url="http://127.0.0.1:$ST_PORT/big?bytes"
        curl -s -o /dev/null --max-time 5 "$url=65536"
        pid=${PID[sluice_stream]}
        before=$(rss_kib "$pid")
        echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || note "cannot reset VmHWM: the peak includes start-up"
        rate=$(bytes_of "$STREAM_RATE")
        note "streaming $STREAM_BYTES bytes at $STREAM_RATE/s: about $((STREAM_BYTES / rate)) s"
        fg_run curl curl -s -o /dev/null --max-time $((STREAM_BYTES * 3 / 2 / rate + 60)) \
            --limit-rate "$STREAM_RATE" -w '%{http_code} %{size_download} %{time_total}\n' \
            "$url=$STREAM_BYTES" >"$tmp/stream.out"
        read -r code size secs <"$tmp/stream.out"
        peak=$(hwm_kib "$pid")
        stop_bg sluice_stream
        [ "${code:-}" = 200 ] && [ "${size:-}" = "$STREAM_BYTES" ] ||
            fail "stream: status ${code:-none}, ${size:-0} of $STREAM_BYTES bytes"
        say ""
        say "== Peak memory while sluice (1 worker, fresh) streams $STREAM_BYTES bytes from sluice-echo"
        say "   to a client reading at $STREAM_RATE/s (curl --limit-rate; M = MiB)"
        say ""
        awk -v b="$before" -v p="$peak" -v s="${size:-0}" -v t="${secs:-1}" 'BEGIN {
            printf "  sluice VmRSS before: %.1f MiB; VmHWM during the stream: %.1f MiB; peak - before: %.1f MiB\n",
                b / 1024, p / 1024, (p - b) / 1024
            printf "  the client received %d bytes in %.1f s (%.1f MiB/s)\n", s, t, s / t / 1048576 }'
    fi
fi

say ""
say "total wall time: $(($(date +%s) - START)) s$([ $FAILED -ne 0 ] && echo ', SOME RUNS FAILED (see stderr)')"
exit "$FAILED"
