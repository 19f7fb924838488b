# sluice in a container: built on Debian bookworm from the same packages as
# scripts/install-deps.sh, run on bookworm-slim with only the shared
# libraries the two binaries load.
#
#   docker build -t sluice .
#   docker run --rm -p 8080:8080 -v "$PWD/conf:/etc/sluice:ro" sluice
#
# The image holds conf/ as /etc/sluice; mount your own directory over it
# (a directory rather than a file, so that a reload sees an edited file).
# Reload: docker kill -s HUP <container>. Stop: SIGTERM drains requests in
# flight for up to server.drain_timeout (give docker stop -t more than that).
# The demo backend is in the image too: --entrypoint sluice-echo.

FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
# The build half of scripts/install-deps.sh; the test suite's packages
# (criterion, curl, redis) are not needed with SLUICE_TESTS=OFF.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        build-essential cmake pkg-config libevent-dev libhiredis-dev \
        libyaml-dev libpcre2-dev libssl-dev libjwt-dev libjansson-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B build -DSLUICE_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    && cmake --build build -j "$(nproc)"

FROM debian:bookworm-slim
ARG DEBIAN_FRONTEND=noninteractive
# What `ldd` lists for sluice and sluice-echo, and nothing else (libcrypto
# is in libssl3), and the CA store that https upstreams are verified
# against by default.
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        libevent-2.1-7 libevent-core-2.1-7 libevent-pthreads-2.1-7 \
        libevent-openssl-2.1-7 libhiredis0.14 libyaml-0-2 libpcre2-8-0 \
        libssl3 libjwt0 libjansson4 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 sluice \
    && useradd --system --uid 10001 --gid sluice --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin sluice
COPY --from=build /src/build/sluice /src/build/sluice-echo /usr/local/bin/
COPY conf/ /etc/sluice/
USER sluice
EXPOSE 8080 9090
STOPSIGNAL SIGTERM
# GET /health on the admin listener (admin.listen must be on port 9090 and
# reachable from inside the container). The slim image has no curl, so
# bash's /dev/tcp speaks the HTTP.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["sluice"]
CMD ["-c", "/etc/sluice/gateway.yaml"]
