#!/usr/bin/python3
"""Module actors through rk-bridge (CPU backend, default worker-process
isolation), from pyzmq + msgpack, checked against numpy.

    test_actors.py PATH-TO-rk-bridge MODULE_BUILD_DIR MODULE_DIR

Loads tests/modules/mod_math.so with --actors and calls its actors by name:
saxpy (a, x, y -> z), minmax (two outputs), count (state across messages),
an actor's own error (ACTOR_FAILED), a GPU-only actor on the CPU
(DEVICE_FAULT), missing or mistyped fields (INVALID_ARGUMENT), an unknown
op naming the actors, `status.actors`; a directory of modules; and each bad
module refused at start (exit 2, the file and the cause on stderr).
Exit 0 pass, 1 fail, 77 skip (pyzmq, msgpack or numpy missing)."""
import os
import sys

try:
    import msgpack
    import numpy as np
    import zmq
except ImportError as e:  # meson reads 77 as skipped
    print("skip: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_interop import Bridge, req, sock  # noqa: E402
from test_interop import call_op as call  # noqa: E402

import subprocess  # noqa: E402


def error(rep, code, *words):
    assert not rep["ok"] and rep["error"]["code"] == code, rep
    for w in words:
        assert w in rep["error"]["message"], (w, rep)


def math_actors(bridge_path, mod_dir):
    b = Bridge(bridge_path, "--actors", os.path.join(mod_dir, "mod_math.so"))
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, b.ep)
    try:
        rng = np.random.default_rng(7)
        for n in (1, 1000, 300000):  # inline and through the arena
            x = rng.standard_normal(n).astype("<f4")
            y = rng.standard_normal(n).astype("<f4")
            a = np.float32(1.5)
            rep = call(s, "saxpy", n, a=a.tobytes(), x=x.tobytes(), y=y.tobytes())
            assert rep["ok"], rep
            z = np.frombuffer(rep["z"], dtype="<f4")
            want = (a * x + y).astype("<f4")
            assert np.array_equal(z.view("<u4"), want.view("<u4")), "saxpy differs from numpy"
        # pipelined: 500 requests in flight, every one answered once
        for i in range(500):
            s.send_multipart([b"", req("saxpy", 10000 + i, a=np.float32(i).tobytes(),
                                       x=np.ones(4, "<f4").tobytes(), y=np.zeros(4, "<f4").tobytes())])
        seen = set()
        for _ in range(500):
            rep = msgpack.unpackb(s.recv_multipart()[-1], raw=False)
            assert rep["ok"] and rep["id"] not in seen, rep
            seen.add(rep["id"])
            assert np.frombuffer(rep["z"], "<f4")[0] == rep["id"] - 10000
        error(call(s, "saxpy", 2, a=b"\0\0\0\0", x=b"\0" * 8, y=b"\0" * 4), "ACTOR_FAILED",
              "actor saxpy", "one length")
        error(call(s, "saxpy", 3, a=b"\0\0\0\0", x=b"\0" * 8), "INVALID_ARGUMENT", "`y`", "missing")
        error(call(s, "saxpy", 4, a=b"\0\0\0\0", x="text", y=b""), "INVALID_ARGUMENT", "`x`")
        rep = call(s, "minmax", 5, data=b"hello")
        assert rep["ok"] and rep["min"] == b"e" and rep["max"] == b"o", rep
        for want in (1, 2, 3):
            rep = call(s, "count", 10 + want, key=b"k")
            assert rep["ok"] and int.from_bytes(rep["total"], "little") == want, rep
        error(call(s, "gpu_only", 6, data=b"x"), "DEVICE_FAULT", "gpu_only", "GPU")
        error(call(s, "nope", 7), "UNKNOWN_OP", "saxpy", "minmax")
        st = call(s, "status", 8)
        acts = {a["name"]: a for a in st["actors"]}
        assert acts["saxpy"]["inputs"] == ["a", "x", "y"] and acts["saxpy"]["outputs"] == ["z"], acts
        assert acts["saxpy"]["cpu"] and not acts["saxpy"]["gpu"], acts
        assert acts["gpu_only"]["gpu"] and not acts["gpu_only"]["cpu"], acts
        assert acts["vadd"]["inputs"] == ["a", "b"] and acts["echo"]["outputs"] == ["data"], acts
        rep = call(s, "echo", 9, data=b"still here")
        assert rep["ok"] and rep["data"] == b"still here", rep
    finally:
        s.close()
        ctx.term()
        b.stop()


def directory(bridge_path, case_dir):
    b = Bridge(bridge_path, "--actors", case_dir)
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, b.ep)
    try:
        assert call(s, "upper", 1, text=b"MiXed")["text"] == b"MIXED"
        assert call(s, "lower", 2, text=b"MiXed")["text"] == b"mixed"
    finally:
        s.close()
        ctx.term()
        b.stop()


def refused(bridge_path, mod_dir):
    cases = {"mod_bad_no_symbol": "no symbol rk_module_v1", "mod_bad_abi": "ABI 99",
             "mod_bad_builtin_name": "collides with the built-in", "mod_bad_field_key": "key \"id\"",
             "mod_bad_gpu_no_kernel": "has no kernel", "mod_bad_duplicate": "also declared by module"}
    for name, cause in cases.items():
        p = subprocess.run([bridge_path, "--backend", "cpu", "--bind", "tcp://127.0.0.1:0",
                            "--actors", os.path.join(mod_dir, "mod_math.so"),
                            "--actors", os.path.join(mod_dir, name + ".so")],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 2, (name, p.returncode, p.stderr)
        assert name in p.stderr and cause in p.stderr, (name, p.stderr)


def main():
    bridge_path, mod_dir, case_dir = sys.argv[1], sys.argv[2], sys.argv[3]
    math_actors(bridge_path, mod_dir)
    directory(bridge_path, case_dir)
    refused(bridge_path, mod_dir)
    print("ok")


if __name__ == "__main__":
    main()
