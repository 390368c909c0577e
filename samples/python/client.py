#!/usr/bin/python3
"""A complete rk-bridge client in Python: pyzmq + msgpack (Debian:
python3-zmq python3-msgpack). Speaks protocol v1 (bridge/PROTOCOL.md).

    client.py [--endpoint tcp://127.0.0.1:5555] [--count N]
              [--server-key FILE --secret-key FILE]

Runs ping, echo, vadd (random data checked against plain Python), status,
and N pipelined echoes; prints each result with its round-trip latency."""
import argparse
import array
import os
import random
import sys
import time

import msgpack
import zmq


class Bridge:
    """One DEALER socket: requests carry an id, replies are matched by it."""

    def __init__(self, endpoint, server_key=None, secret_key=None, timeout_ms=5000):
        self.ctx = zmq.Context.instance()
        self.s = self.ctx.socket(zmq.DEALER)
        self.s.setsockopt(zmq.LINGER, 0)
        self.s.setsockopt(zmq.RCVTIMEO, timeout_ms)
        if server_key:  # CURVE: the bridge's public key and our own keypair
            self.s.curve_serverkey = server_key.encode()
            self.s.curve_secretkey = secret_key.encode()
            self.s.curve_publickey = zmq.curve_public(secret_key.encode())
        self.s.connect(endpoint)
        self.next_id = 1

    def send(self, op, **fields):
        rid = self.next_id
        self.next_id += 1
        msg = {"v": 1, "id": rid, "op": op}
        msg.update(fields)
        self.s.send(msgpack.packb(msg, use_bin_type=True))
        return rid

    def recv(self):
        return msgpack.unpackb(self.s.recv(), raw=False)

    def call(self, op, **fields):
        """Send and wait for this request's reply; returns (reply, microseconds)."""
        t0 = time.perf_counter()
        rid = self.send(op, **fields)
        while True:
            rep = self.recv()
            if rep.get("id") in (rid, None):
                return rep, (time.perf_counter() - t0) * 1e6


def check(rep):
    if not rep.get("ok"):
        err = rep.get("error", {})
        sys.exit("error %s: %s" % (err.get("code"), err.get("message")))
    return rep


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", "-e", default="tcp://127.0.0.1:5555")
    ap.add_argument("--count", "-c", type=int, default=2000, help="pipelined echoes")
    ap.add_argument("--n", type=int, default=100000, help="vadd elements")
    ap.add_argument("--server-key", help="CURVE: the bridge's public key file")
    ap.add_argument("--secret-key", help="CURVE: this client's secret key file")
    a = ap.parse_args()
    rd = lambda f: open(f).readline().strip() if f else None
    b = Bridge(a.endpoint, rd(a.server_key), rd(a.secret_key))

    rep, us = b.call("ping")
    print("python ping: backend %s, round trip %.1f us" % (check(rep)["backend"], us))

    lat = []
    for _ in range(200):
        data = os.urandom(64)
        rep, us = b.call("echo", data=data)
        assert check(rep)["data"] == data
        lat.append(us)
    lat.sort()
    print("python echo 64 B x 200: all intact; round trip p50 %.1f us, p99 %.1f us"
          % (lat[len(lat) // 2], lat[len(lat) * 99 // 100]))

    x = array.array("f", (random.uniform(-1e3, 1e3) for _ in range(a.n)))
    y = array.array("f", (random.uniform(-1e3, 1e3) for _ in range(a.n)))
    rep, us = b.call("vadd", a=x.tobytes(), b=y.tobytes())
    c = array.array("f")
    c.frombytes(check(rep)["c"])
    # float32 sums, computed here: the reply must match bit for bit
    want = array.array("f", (p + q for p, q in zip(x, y)))
    bad = sum(1 for u, v in zip(c, want) if u != v)
    print("python vadd %d elements: c[0] = %.3f, %s, round trip %.1f us"
          % (a.n, c[0], "all equal to the local sum" if bad == 0 else "%d DIFFER" % bad, us))
    if bad:
        sys.exit(1)

    rep, us = b.call("status")
    check(rep)
    print("python status (%.1f us): backend %s, device %s, kernel %s, counters %s"
          % (us, rep["backend"], rep["device"], rep["kernel"],
             {k: rep["counters"][k] for k in ("requests", "replies", "errors", "restarts")}))

    t0 = time.perf_counter()
    window, sent, got = 64, 0, 0
    while got < a.count:
        while sent < a.count and sent - got < window:
            b.send("echo", data=b"x" * 64)
            sent += 1
        check(b.recv())
        got += 1
    dt = time.perf_counter() - t0
    print("python pipelined echo: %d replies in %.3f s = %.0f per second (window %d)"
          % (a.count, dt, a.count / dt, window))


if __name__ == "__main__":
    main()
