#!/usr/bin/python3
"""A complete rk-bridge client in Python, on the `ringkernel` package
(bridge/client/python/ringkernel: pure Python over pyzmq + msgpack; Debian:
python3-zmq python3-msgpack). Speaks protocol v1.1 (bridge/PROTOCOL.md).

    client.py [--endpoint tcp://127.0.0.1:5555] [--count N]
              [--server-key FILE --secret-key FILE]

Runs ping, echo, vadd (random data checked against plain Python), status,
the actor list, and N pipelined echoes; prints each result with its
round-trip latency. From the source tree it uses the tree's package; else
the installed one (`meson install` puts it where /usr/bin/python3 looks)."""
import argparse
import array
import os
import random
import sys
import time

_tree = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bridge", "client", "python")
if os.path.isdir(os.path.join(_tree, "ringkernel")):
    sys.path.insert(0, _tree)
import ringkernel  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", "-e", default=ringkernel.DEFAULT_ENDPOINT)
    ap.add_argument("--count", "-c", type=int, default=2000, help="pipelined echoes")
    ap.add_argument("--n", type=int, default=100000, help="vadd elements")
    ap.add_argument("--server-key", help="CURVE: the bridge's public key file")
    ap.add_argument("--secret-key", help="CURVE: this client's secret key file")
    a = ap.parse_args()
    rd = lambda f: open(f).readline().strip() if f else None
    try:
        rk = ringkernel.Client(a.endpoint, timeout=10, server_key=rd(a.server_key),
                               secret_key=rd(a.secret_key))
    except ValueError as e:  # a malformed endpoint or key: a bad command line
        print("client.py: %s" % e, file=sys.stderr)
        sys.exit(2)
    with rk:
        run(rk, a)


def run(rk, a):
    r = rk.call("ping")
    print("python ping: backend %s, round trip %.1f us" % (r["backend"], r.rtt * 1e6))

    lat = []
    for _ in range(200):
        data = os.urandom(64)
        r = rk.call("echo", data=data)
        assert r["data"] == data
        lat.append(r.rtt * 1e6)
    lat.sort()
    print("python echo 64 B x 200: all intact; round trip p50 %.1f us, p99 %.1f us"
          % (lat[len(lat) // 2], lat[len(lat) * 99 // 100]))

    # any actor by name, its fields as keywords (numpy arrays work too)
    x = array.array("f", (random.uniform(-1e3, 1e3) for _ in range(a.n)))
    y = array.array("f", (random.uniform(-1e3, 1e3) for _ in range(a.n)))
    r = rk.call("vadd", a=x, b=y)
    c = array.array("f")
    c.frombytes(r["c"])
    # float32 sums, computed here: the reply must match bit for bit
    want = array.array("f", (p + q for p, q in zip(x, y)))
    bad = sum(1 for u, v in zip(c, want) if u != v)
    print("python vadd %d elements: c[0] = %.3f, %s, round trip %.1f us"
          % (a.n, c[0], "all equal to the local sum" if bad == 0 else "%d DIFFER" % bad, r.rtt * 1e6))
    if bad:
        sys.exit(1)

    st = rk.status()
    print("python status (%.1f us): backend %s, device %s, kernel %s, counters %s"
          % (st.rtt * 1e6, st["backend"], st["device"], st["kernel"],
             {k: st["counters"][k] for k in ("requests", "replies", "errors", "restarts")}))
    print("python actors: %s" % ", ".join("%s(%s) -> %s" % (t.name, ", ".join(t.inputs), ", ".join(t.outputs))
                                          for t in rk.actors()))
    try:
        rk.call("vadd", a=x[:3], b=y[:2])
    except ringkernel.InvalidArgument as e:
        print("python error as an exception: %s: %s" % (type(e).__name__, e))

    t0 = time.perf_counter()
    window, done = 64, 0
    inflight = []
    while done < a.count:  # keep `window` requests in flight
        while len(inflight) < window and done + len(inflight) < a.count:
            inflight.append(rk.call_async("echo", data=b"x" * 64))
        inflight.pop(0).result()
        done += 1
    dt = time.perf_counter() - t0
    print("python pipelined echo: %d replies in %.3f s = %.0f per second (window %d)"
          % (a.count, dt, a.count / dt, window))


if __name__ == "__main__":
    try:
        main()
    except ringkernel.RingkernelError as e:
        sys.exit("client.py: %s" % e)
