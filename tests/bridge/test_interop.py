#!/usr/bin/python3
"""Interop: drive rk-bridge (CPU backend) from pyzmq + msgpack, a client the
project did not write, with REQ and DEALER sockets; check results against
numpy. Usage: test_interop.py PATH-TO-rk-bridge. Exit 0 pass, 1 fail, 77 skip
(pyzmq, msgpack or numpy missing)."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile

try:
    import msgpack
    import numpy as np
    import zmq
except ImportError as e:  # meson reads 77 as skipped
    print("skip: %s" % e)
    sys.exit(77)

TMO = 20000  # ms


def start(bridge, endpoint):
    p = subprocess.Popen([bridge, "--backend", "cpu", "--bind", endpoint, "--log-level", "warn"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    assert "listening on" in line, "rk-bridge did not start: %r" % line
    return p


def sock(ctx, kind, endpoint):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVTIMEO, TMO)
    s.connect(endpoint)
    return s


def req(op, id_, **kw):
    m = {"v": 1, "id": id_, "op": op}
    m.update(kw)
    return msgpack.packb(m, use_bin_type=True)


def f32(a):
    return np.asarray(a, dtype="<f4").tobytes()


def check_vadd(rep, a, b):
    assert rep["ok"], rep
    c = np.frombuffer(rep["c"], dtype="<f4")
    want = (a.astype("<f4") + b.astype("<f4")).astype("<f4")
    # bit for bit, except that any NaN may come back as another NaN
    same = (c.view("<u4") == want.view("<u4")) | (np.isnan(c) & np.isnan(want))
    assert same.all(), "vadd differs at %s" % np.nonzero(~same)[0][:5]


def main():
    bridge = sys.argv[1]
    d = tempfile.mkdtemp(prefix="rkbi-")
    ep = "ipc://%s/b.sock" % d
    p = start(bridge, ep)
    ctx = zmq.Context()
    rng = np.random.default_rng(7)
    try:
        # REQ: one at a time, envelope with the empty delimiter
        r = sock(ctx, zmq.REQ, ep)
        r.send(req("ping", 1))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep == {"v": 1, "id": 1, "ok": True, "backend": "cpu"}, rep
        data = os.urandom(1000)
        r.send(req("echo", 2, data=data))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["ok"] and rep["id"] == 2 and rep["data"] == data, rep
        a = rng.standard_normal(4096).astype("<f4")
        b = rng.standard_normal(4096).astype("<f4")
        a[0], b[1], a[2], b[2] = np.nan, np.inf, np.inf, -np.inf
        r.send(req("vadd", 3, a=f32(a), b=f32(b)))
        check_vadd(msgpack.unpackb(r.recv(), raw=False), a, b)
        r.send(req("status", 4))
        st = msgpack.unpackb(r.recv(), raw=False)
        assert st["ok"] and st["backend"] == "cpu" and st["device"] is None, st
        for k in ("grid", "block", "smem"):
            assert isinstance(st["kernel"][k], int)
        for k in ("max_grid", "max_block", "max_smem"):
            assert isinstance(st["limits"][k], int)
        for k in ("requests", "replies", "errors", "restarts"):
            assert isinstance(st["counters"][k], int) and st["counters"][k] >= 0
        r.send(req("launch", 5, grid=2, block=64, smem=0))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["ok"] and rep["kernel"] == {"grid": 2, "block": 64, "smem": 0}, rep
        # error rows over REQ
        r.send(b"\xc1 garbage")
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["ok"] is False and rep["id"] is None and rep["error"]["code"] == "MALFORMED", rep
        r.send(req("vadd", 6, a=f32([1, 2]), b=f32([1])))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["id"] == 6 and rep["error"]["code"] == "INVALID_ARGUMENT", rep
        assert "equal" in rep["error"]["message"], rep
        r.send(req("fly", 7))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["id"] == 7 and rep["error"]["code"] == "UNKNOWN_OP", rep
        r.send(msgpack.packb({"v": 2, "id": 8, "op": "ping"}))
        rep = msgpack.unpackb(r.recv(), raw=False)
        assert rep["id"] == 8 and rep["error"]["code"] == "UNSUPPORTED_VERSION", rep
        r.close()

        # DEALER: many in flight, replies matched by id
        dl = sock(ctx, zmq.DEALER, ep)
        want = {}
        for i in range(1, 501):
            if i % 3:
                data = os.urandom(int(rng.integers(0, 5000)))
                dl.send(req("echo", i, data=data))
                want[i] = ("echo", data)
            else:
                n = int(rng.integers(1, 20000))
                a = rng.standard_normal(n).astype("<f4")
                b = rng.standard_normal(n).astype("<f4")
                dl.send(req("vadd", i, a=f32(a), b=f32(b)))
                want[i] = ("vadd", (a, b))
        got = set()
        for _ in range(500):
            rep = msgpack.unpackb(dl.recv(), raw=False)
            i = rep["id"]
            assert i in want and i not in got, rep.get("id")
            got.add(i)
            kind, w = want[i]
            if kind == "echo":
                assert rep["ok"] and rep["data"] == w, i
            else:
                check_vadd(rep, *w)
        dl.send(req("echo", 9999, data=b"x"), zmq.SNDMORE)
        dl.send(req("echo", 9999, data=b"x"))
        rep = msgpack.unpackb(dl.recv(), raw=False)
        assert rep["error"]["code"] == "MALFORMED" and "body frames" in rep["error"]["message"], rep
        dl.close()
        print("interop: REQ and DEALER, ping/echo/vadd/status/launch and error rows: ok")
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        ctx.term()
        shutil.rmtree(d, ignore_errors=True)
    assert rc == 0, "rk-bridge exited with %d" % rc
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("FAIL: %s" % e)
        sys.exit(1)
