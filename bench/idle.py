#!/usr/bin/env python3
"""idle.py - hold many idle keep-alive client connections (bench/run.sh).

    python3 bench/idle.py PORT PATH N

Opens N connections to 127.0.0.1:PORT, one after another, sends one
keep-alive `GET PATH` on each and reads the whole reply, then keeps them all
open and idle. Prints `ready N` on stdout once every connection has had its
reply, then waits for SIGTERM (and exits by itself after 10 minutes).
Exits 1, with a message on stderr, when a connection or a reply fails.
Standard library only.
"""
import resource
import signal
import socket
import sys


def read_reply(sock):
    """Read one HTTP/1.1 response with a Content-Length; return its status."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the end of the reply head")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before the end of the reply body")
        body += chunk
    return status


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: idle.py PORT PATH N")
    port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n + 64, hard), hard))
    signal.alarm(600)  # never outlive a forgotten run
    request = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode()
    socks = []
    for i in range(n):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(request)
            status = read_reply(sock)
        except (OSError, ValueError, IndexError) as e:
            sys.exit("idle.py: connection %d of %d: %s" % (i + 1, n, e))
        if status != 200:
            sys.exit("idle.py: connection %d of %d: status %d"
                     % (i + 1, n, status))
        socks.append(sock)
    print("ready", len(socks), flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
