#!/bin/sh
# Installs what sluice needs to build, run and test, from Debian's packages.
# Does nothing when everything is already there; uses sudo when not root.
#   scripts/install-deps.sh            what building, running and testing need
#   scripts/install-deps.sh PKG...     those packages instead (e.g. wrk)
set -eu

PACKAGES="build-essential cmake pkg-config libevent-dev libhiredis-dev
libyaml-dev libpcre2-dev libssl-dev libhttp-parser-dev libjwt-dev
libjansson-dev libcriterion-dev
libcurl4-openssl-dev redis-server curl clang libclang-rt-14-dev openssl
ca-certificates"
[ $# -gt 0 ] && PACKAGES="$*"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: need root or sudo to install:$missing" >&2
    exit 1
fi
echo "install-deps: installing:$missing"
$SUDO apt-get update -qq
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
