#!/usr/bin/env python3
"""Calls every actor of sample_actors.so through a running rk-bridge
(--actors sample_actors.so, freshly started: count's total starts at 0)
and checks what it answers, by the bridge's backend:

  cpu:  saxpy bit-identical to numpy's float32 a * x + y (its CPU twin),
        inline and arena sized up to 2^24 elements; bad fields ->
        ACTOR_FAILED naming the field, a missing one -> INVALID_ARGUMENT;
        count keeps a running total; crash and spin (GPU only) ->
        DEVICE_FAULT saying the backend cannot serve them, and the
        service goes on.
  cuda: the same saxpy and count results from the GPU handlers; crash
        costs its own request (DEVICE_FAULT naming it), the next calls are
        served, and count starts over from 0 (device state after a fault);
        spin, with --spin (the bridge has --request-deadline-ms), the same.

    check_sample_actors.py ENDPOINT [--client-path DIR] [--spin]
Exit 0 when every check held; prints one line per check.
"""
import sys
import time

import numpy as np

args = sys.argv[1:]
if "--client-path" in args:
    i = args.index("--client-path")
    sys.path.insert(0, args[i + 1])
    del args[i:i + 2]
spin = "--spin" in args
if spin:
    args.remove("--spin")
import ringkernel  # noqa: E402

endpoint = args[0]
failures = 0


def check(what, ok, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + what + (": " + detail if detail else ""))
    failures += not ok


def saxpy(c, n):
    rng = np.random.default_rng(n)
    a = np.float32(rng.uniform(-4, 4))
    x = rng.uniform(-1e3, 1e3, n).astype(np.float32)
    y = rng.uniform(-1e3, 1e3, n).astype(np.float32)
    got = np.frombuffer(c.call("saxpy", a=a.tobytes(), x=x.tobytes(), y=y.tobytes())["y"], np.float32)
    want = (a * x).astype(np.float32) + y  # two roundings, as the twin and the GPU
    return got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def count(c, add):
    return int(np.frombuffer(c.call("count", add=np.uint64(add).tobytes())["total"], np.uint64)[0])


def fault(c, name):
    t0 = time.monotonic()
    try:
        c.call(name, why=b"on purpose", timeout=30)
        return None, time.monotonic() - t0
    except ringkernel.DeviceFault as e:
        return str(e), time.monotonic() - t0


with ringkernel.Client(endpoint, timeout=30) as c:
    backend = c.ping()
    backend = backend if isinstance(backend, str) else c.status().get("backend", "?")
    actors = {a.name: a for a in c.actors()}
    check("actors listed", all(n in actors for n in ("saxpy", "count", "crash", "spin")), ", ".join(actors))
    check("saxpy declares a, x, y -> y", actors["saxpy"].inputs == ("a", "x", "y") and actors["saxpy"].outputs == ("y",))
    check("crash and spin have no CPU twin", not actors["crash"].cpu and not actors["spin"].cpu)
    gpu = "cuda" in backend
    print("backend:", backend)
    for n in (1, 1000, 100_000, 1 << 24):  # 2^24: the size the GPU benchmark adds (a 128 MiB request)
        check(f"saxpy n={n} bit-identical to float32 a*x+y", saxpy(c, n))
    try:
        c.call("saxpy", a=b"12", x=b"1234", y=b"1234")
        check("saxpy with a 2-byte a refused", False, "answered")
    except ringkernel.ActorFailed as e:
        check("saxpy with a 2-byte a refused", "a must be one float32" in str(e), str(e))
    try:
        c.call("saxpy", a=b"1234", x=b"1234")
        check("saxpy without y refused", False, "answered")
    except ringkernel.InvalidArgument as e:
        check("saxpy without y refused", "y" in str(e), str(e))
    totals = [count(c, k) for k in (1, 2, 3)]
    check("count keeps a running total", totals == [1, 3, 6], str(totals))
    msg, dt = fault(c, "crash")
    if not gpu:
        check("crash on the CPU backend: DEVICE_FAULT, cannot serve", msg is not None and "cannot serve crash" in msg,
              str(msg))
        msg, dt = fault(c, "spin")
        check("spin on the CPU backend: DEVICE_FAULT, cannot serve", msg is not None and "cannot serve spin" in msg,
              str(msg))
        check("the service goes on", saxpy(c, 1000) and count(c, 4) == 10)
    else:
        check("crash: DEVICE_FAULT naming it", msg is not None and "crash" in msg, f"{msg} after {dt * 1e3:.0f} ms")
        check("after the fault: saxpy served", saxpy(c, 1000))
        check("after the fault: count starts over", count(c, 5) == 5)
        if spin:
            msg, dt = fault(c, "spin")
            check("spin: DEVICE_FAULT after the deadline", msg is not None and "spin" in msg,
                  f"{msg} after {dt * 1e3:.0f} ms")
            check("after the deadline: saxpy served", saxpy(c, 1000))
        else:
            print("skip spin: the bridge has no --request-deadline-ms")
sys.exit(1 if failures else 0)
