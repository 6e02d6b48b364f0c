"""Measures what the emulated network really gives: TCP round-trip time and bulk bandwidth.

    netcheck.py serve PORT                      # in one namespace
    netcheck.py ping HOST PORT [COUNT]          # in another: RTT of 64-byte TCP ping-pongs
    netcheck.py bulk HOST PORT [SECONDS]        # one TCP stream, sender to receiver
    netcheck.py first HOST PORT [BYTES]         # a message's time on a new connection, then on
                                                # the same one warm and after a second idle

Both client modes print one JSON line. Standard library only, so it runs before (and without)
the project's environment.
"""

import json
import socket
import statistics
import sys
import time

CHUNK = 1 << 20


def serve(port: int) -> None:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(4)
    while True:
        conn, _ = srv.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            mode = conn.recv(1)
            if mode == b"P":  # echo fixed-size messages until the client closes
                while True:
                    msg = _recv_exact(conn, 64)
                    if msg is None:
                        break
                    conn.sendall(msg)
            elif mode == b"B":  # count bytes until the client closes its side, then report
                total = 0
                while True:
                    data = conn.recv(CHUNK)
                    if not data:
                        break
                    total += len(data)
                conn.sendall(str(total).encode())
            elif mode == b"F":  # one byte back for each message of the announced size
                size = int(_recv_exact(conn, 12))
                while _recv_exact(conn, size) is not None:
                    conn.sendall(b"k")
            elif mode == b"Q":
                return


def _recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        part = conn.recv(n - len(buf))
        if not part:
            return None
        buf += part
    return buf


def _connect(host, port):
    for _ in range(100):  # the server may still be starting
        try:
            return socket.create_connection((host, port), timeout=30)
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"cannot connect to {host}:{port}")


def ping(host: str, port: int, count: int) -> dict:
    conn = _connect(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(b"P")
    msg = b"x" * 64
    rtts = []
    for i in range(count + 10):
        t0 = time.perf_counter()
        conn.sendall(msg)
        _recv_exact(conn, 64)
        if i >= 10:  # the first exchanges warm up caches and the delay lines
            rtts.append((time.perf_counter() - t0) * 1e6)
    conn.close()
    q = statistics.quantiles(rtts, n=10)
    return {"rtt_us_median": round(statistics.median(rtts), 1), "rtt_us_p10": round(q[0], 1),
            "rtt_us_p90": round(q[-1], 1), "count": count}


def bulk(host: str, port: int, seconds: float) -> dict:
    conn = _connect(host, port)
    conn.sendall(b"B")
    payload = b"\0" * CHUNK
    sent = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        conn.sendall(payload)
        sent += CHUNK
    conn.shutdown(socket.SHUT_WR)
    received = int(conn.recv(64))  # arrives once the receiver has everything
    elapsed = time.perf_counter() - t0
    conn.close()
    return {"gbit_per_s": round(received * 8 / elapsed / 1e9, 3), "bytes": received,
            "seconds": round(elapsed, 2)}


def first_use(host: str, port: int, size: int) -> dict:
    """TCP opens a connection's congestion window as data flows (slow start): the first message
    on a new connection takes round trips that later ones do not, which is what an arm's first
    call pays on connections nothing has used yet."""
    conn = _connect(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.sendall(b"F" + b"%12d" % size)
    payload = b"\0" * size

    def one() -> float:
        t0 = time.perf_counter()
        conn.sendall(payload)
        _recv_exact(conn, 1)
        return (time.perf_counter() - t0) * 1e3

    first = one()
    warm = [one() for _ in range(10)]
    time.sleep(1.0)
    after_idle = one()
    conn.close()
    return {"bytes": size, "first_ms": round(first, 2),
            "warm_ms_median": round(statistics.median(warm), 2),
            "after_1s_idle_ms": round(after_idle, 2)}


def quit_server(host: str, port: int) -> None:
    conn = _connect(host, port)
    conn.sendall(b"Q")
    conn.close()


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "serve":
        serve(int(args[0]))
    elif mode == "ping":
        print(json.dumps(ping(args[0], int(args[1]), int(args[2]) if len(args) > 2 else 500)))
    elif mode == "bulk":
        print(json.dumps(bulk(args[0], int(args[1]), float(args[2]) if len(args) > 2 else 3.0)))
    elif mode == "first":
        print(json.dumps(first_use(args[0], int(args[1]), int(args[2]) if len(args) > 2
                                   else 256 << 10)))
    elif mode == "quit":
        quit_server(args[0], int(args[1]))
    else:
        sys.exit(f"unknown mode {mode!r}; accepted: serve, ping, bulk, first, quit")


if __name__ == "__main__":
    main()
