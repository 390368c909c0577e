#!/usr/bin/python3
"""The ringkernel package's tests (unittest): against rk-bridge on the CPU
backend, started here on an ipc:// endpoint.

    RK_BRIDGE=PATH-TO-rk-bridge RK_VERSION=X.Y.Z \\
        PYTHONPATH=bridge/client/python /usr/bin/python3 test_ringkernel.py

Exit 0 pass, 1 fail, 77 skip (pyzmq, msgpack or numpy missing, or no
RK_BRIDGE)."""
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

try:
    import msgpack  # noqa: F401 (the package needs it)
    import numpy as np
    import zmq  # noqa: F401
except ImportError as e:  # meson reads 77 as skipped
    print("skip: %s" % e)
    sys.exit(77)

import ringkernel

BRIDGE = os.environ.get("RK_BRIDGE")


class Bridge:
    """One rk-bridge --backend cpu in a temporary directory."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="rkpy-")
        self.ep = "ipc://%s/b.sock" % self.dir
        self.err = open(os.path.join(self.dir, "stderr"), "w+")
        self.p = subprocess.Popen([BRIDGE, "--backend", "cpu", "--bind", self.ep] + list(args),
                                  stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.p.stdout.readline()
        assert "listening on" in line, "rk-bridge did not start: %r" % line

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(timeout=120)
        self.err.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        return rc


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # admin ops for everyone (launch), the test ops fault/hang, a 1 MiB
        # message limit (TOO_LARGE), and a short request deadline (hang)
        cls.b = Bridge("--allow-admin-ops", "--test-faults", "--max-message-bytes", "1M",
                       "--request-deadline-ms", "500")
        cls.rk = ringkernel.Client(cls.b.ep, timeout=20)

    @classmethod
    def tearDownClass(cls):
        cls.rk.close()
        assert cls.b.stop() == 0

    def test_version(self):
        self.assertEqual(ringkernel.__version__, os.environ.get("RK_VERSION", ringkernel.__version__))

    def test_ping_echo(self):
        self.assertEqual(self.rk.ping(), "cpu")
        for data in (b"", b"\x00hi", bytearray(b"ba"), memoryview(b"xyz")[1:]):
            r = self.rk.call("echo", data=data)
            self.assertEqual(r["data"], bytes(data))
            self.assertGreater(r.rtt, 0)
        self.assertEqual(self.rk.call("echo", {"data": b"dict"})["data"], b"dict")

    def test_vadd_numpy(self):
        rng = np.random.default_rng(7)
        a = rng.standard_normal(10000).astype("<f4") * 1000
        b = rng.standard_normal(10000).astype("<f4")
        a[:3] = [np.inf, -np.inf, np.nan]
        c = self.rk.call("vadd", a=a, b=b).array("c")
        want = a + b
        same = (c.view("<u4") == want.view("<u4")) | (np.isnan(c) & np.isnan(want))
        self.assertTrue(same.all())
        # a non-contiguous array goes as its elements in order
        c2 = self.rk.call("vadd", a=a[::2], b=b[::2]).array("c", dtype=np.float32)
        self.assertTrue(np.array_equal(c2[3:], (a[::2] + b[::2])[3:]))

    def test_numpy_integers(self):
        # numpy integer scalars are integers (msgpack uint), as int is: they
        # went as 8-byte bins (they have the buffer protocol) and launch
        # answered INVALID_ARGUMENT; arrays stay bins
        r = self.rk.call("launch", grid=np.int64(2), block=np.uint32(64), smem=np.int16(0))
        self.assertEqual(r["kernel"], {"grid": 2, "block": 64, "smem": 0})
        self.rk.call("launch", grid=0, block=0, smem=0)  # as the bridge started
        self.assertEqual(self.rk.call("echo", data=np.array([7], dtype="<i8"))["data"], bytes([7]) + bytes(7))

    def test_pipelining(self):
        futs = [self.rk.call_async("echo", data=b"%d" % i) for i in range(3000)]
        self.assertEqual([f.result()["data"] for f in futs], [b"%d" % i for i in range(3000)])
        ids = {f.result().id for f in futs}
        self.assertEqual(len(ids), 3000)

    def test_threads(self):
        from concurrent.futures import ThreadPoolExecutor

        def work(i):
            v = np.full(100, i, dtype="<f4")
            return self.rk.call("vadd", a=v, b=v).array("c")[0]
        with ThreadPoolExecutor(8) as ex:
            self.assertEqual(list(ex.map(work, range(200))), [2.0 * i for i in range(200)])

    def test_status_actors(self):
        st = self.rk.status()
        self.assertEqual(st["backend"], "cpu")
        self.assertIn("requests", st["counters"])
        acts = {a.name: a for a in self.rk.actors()}
        self.assertEqual(acts["vadd"], ringkernel.Actor("vadd", ("a", "b"), ("c",), True, True))
        self.assertEqual(acts["echo"].inputs, ("data",))

    def assertRaisesCode(self, cls, fn, *args, needle=None, **kw):
        with self.assertRaises(cls) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertIsInstance(e, ringkernel.RingkernelError)
        self.assertEqual(e.code, cls.code)
        self.assertTrue(e.message)
        if needle:
            self.assertIn(needle, e.message)
        return e

    def test_errors(self):
        rk = self.rk
        e = self.assertRaisesCode(ringkernel.UnknownOp, rk.call, "nope", needle="echo")
        self.assertEqual(e.op, "nope")
        self.assertIsInstance(e.id, int)
        self.assertRaisesCode(ringkernel.InvalidArgument, rk.call, "vadd", a=b"abcd", needle="`b`")
        self.assertRaisesCode(ringkernel.InvalidArgument, rk.call, "echo", data="text", needle="`data`")
        self.assertRaisesCode(ringkernel.InvalidArgument, rk.call, "vadd", a=b"abcd", b=b"ab")
        self.assertRaisesCode(ringkernel.TooLarge, rk.call, "echo", data=bytes(2 << 20))
        self.assertRaisesCode(ringkernel.UnsupportedVersion, rk.request({"op": "ping", "v": 2}).result)
        self.assertRaisesCode(ringkernel.Malformed, rk.request({"op": "ping", 7: 1}).result)
        self.assertRaisesCode(ringkernel.LaunchInvalid, rk.call, "launch", grid=1 << 40, block=64, smem=0)
        self.assertRaisesCode(ringkernel.DeviceFault, rk.call, "fault")
        self.assertEqual(rk.ping(), "cpu")  # served on after the fault

    def test_refused_locally(self):
        with self.assertRaises(ValueError):
            self.rk.call("echo", id=b"x")
        with self.assertRaises(ValueError):
            self.rk.call("echo", {"data": b"a"}, data=b"b")
        with self.assertRaises(TypeError):
            self.rk.call("echo", data=object())
        with self.assertRaises(ValueError):
            self.rk.call("")

    def test_decoder_limits(self):
        # more than the bridge decodes (PROTOCOL.md, "Decoder limits": 4096
        # msgpack objects, 16 levels) got MALFORMED with id nil, which goes
        # to the oldest request waiting, maybe another one: refused here
        many = {"f%d" % i: 1 for i in range(2043)}
        self.assertEqual(self.rk.call("echo", many, data=b"x")["data"], b"x")  # 2044 fields
        for fields, says in (({"f%d" % i: 1 for i in range(2044)}, "2045 fields: a request carries at most 2044"),
                             ({"x": [0] * 4096}, "4107 msgpack objects"),
                             ({"x": [[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]}, "more than 16 levels")):
            with self.assertRaises(ValueError) as cm:
                self.rk.call("echo", fields, data=b"x")
            self.assertIn(says, str(cm.exception))
            with self.assertRaises(ValueError):
                self.rk.request(dict(fields, op="echo", data=b"x"))

    def test_async(self):
        async def main():
            async with ringkernel.AsyncClient(self.b.ep, timeout=20) as rk:
                self.assertEqual(await rk.ping(), "cpu")
                reps = await asyncio.gather(*(rk.call("echo", data=b"%d" % i) for i in range(500)))
                self.assertEqual([r["data"] for r in reps], [b"%d" % i for i in range(500)])
                v = np.arange(8, dtype="<f4")
                self.assertTrue(np.array_equal((await rk.call("vadd", a=v, b=v)).array("c"), v * 2))
                with self.assertRaises(ringkernel.UnknownOp):
                    await rk.call("nope")
                self.assertIn("vadd", [a.name for a in await rk.actors()])
            with self.assertRaises(ringkernel.ClientClosed):
                await rk.call("ping")
        asyncio.run(main())


class NoBridgeTest(unittest.TestCase):
    def test_actors_of_an_older_bridge(self):
        from ringkernel import wire
        with self.assertWarns(UserWarning):
            self.assertEqual(wire.actors({"backend": "cpu"}, "tcp://old"), list(ringkernel.BUILTIN_ACTORS))

    def test_timeout(self):
        d = tempfile.mkdtemp(prefix="rkpy-")
        try:
            with ringkernel.Client("ipc://%s/nobody" % d, timeout=0.3) as rk:
                with self.assertRaises(ringkernel.Timeout) as cm:
                    rk.ping()
                self.assertIsInstance(cm.exception, TimeoutError)
                self.assertIn("0.3 s", str(cm.exception))
                fut = rk.call_async("echo", data=b"x", timeout=0.2)
                self.assertIsInstance(fut.exception(5), ringkernel.Timeout)
                pending = rk.call_async("echo", data=b"x", timeout=None)
            self.assertIsInstance(pending.exception(5), ringkernel.ClientClosed)
            with self.assertRaises(ringkernel.ClientClosed):
                rk.ping()

            async def main():
                async with ringkernel.AsyncClient("ipc://%s/nobody" % d, timeout=0.2) as ark:
                    with self.assertRaises(ringkernel.Timeout):
                        await ark.ping()
            asyncio.run(main())
        finally:
            shutil.rmtree(d, ignore_errors=True)


    def test_async_one_deadline(self):
        # AsyncClient gave its send and its wait the whole timeout each: a
        # send that waited for room most of t was followed by a wait of t
        # more. Here the queue to a peer not up yet is full, and a ROUTER
        # that reads and never answers comes up at 0.8 t. (A bound on a
        # timeout, generous for a loaded machine.)
        t = 1.0
        d = tempfile.mkdtemp(prefix="rkpy-")
        ep = "ipc://%s/late" % d
        stop = threading.Event()

        def late_router():
            if stop.wait(0.8 * t):
                return
            s = zmq.Context.instance().socket(zmq.ROUTER)
            s.linger = 0
            s.bind(ep)
            while not stop.is_set():
                if s.poll(20):
                    while s.poll(0):
                        s.recv()
            s.close()
        th = threading.Thread(target=late_router)

        async def main():
            async with ringkernel.AsyncClient(ep, timeout=t) as ark:
                ark._sock.setsockopt(zmq.SNDHWM, 1)
                with self.assertRaises(ringkernel.Timeout):
                    await ark.ping(timeout=0.05)  # its request fills the queue
                th.start()
                t0 = time.monotonic()
                with self.assertRaises(ringkernel.Timeout):
                    await ark.ping()
                return time.monotonic() - t0
        try:
            took = asyncio.run(main())
        finally:
            stop.set()
            if th.is_alive():
                th.join()
            shutil.rmtree(d, ignore_errors=True)
        self.assertLess(took, 1.5 * t + 0.1)

    def test_bad_error_code(self):
        # an error reply whose code is not a str (a broken or hostile peer)
        # raised TypeError in the I/O thread: the thread died, the call got
        # ClientClosed and every later call waited out its timeout
        d = tempfile.mkdtemp(prefix="rkpy-")
        ep = "ipc://%s/peer" % d
        srv = zmq.Context.instance().socket(zmq.ROUTER)
        srv.linger = 0
        srv.bind(ep)

        def peer():
            for body in ({"ok": False, "error": {"code": [1], "message": "odd"}}, {"ok": True, "backend": "cpu"}):
                frames = srv.recv_multipart()
                rid = msgpack.unpackb(frames[-1])["id"]
                srv.send_multipart(frames[:-1] + [msgpack.packb(dict(body, v=1, id=rid))])
        th = threading.Thread(target=peer)
        th.start()
        try:
            with ringkernel.Client(ep, timeout=2) as rk:
                with self.assertRaises(ringkernel.RingkernelError) as cm:
                    rk.ping()
                self.assertEqual(cm.exception.code, "INTERNAL")
                self.assertEqual(rk.ping(), "cpu")
        finally:
            th.join(10)
            srv.close()
            shutil.rmtree(d, ignore_errors=True)

    def test_malformed_endpoint(self):
        # what is wrong, not ZeroMQ's bare "Invalid argument"
        cases = (("localhost:5601", "(tcp://localhost:5601?)"), ("tcp://127.0.0.1", "no port"),
                 ("tcp://127.0.0.1:99999", "'99999' is not a number from 1 to 65535"),
                 ("tcp://*:5555", "for binding"), ("ipc://", "no path"),
                 ("bogus://x", "unknown transport bogus://"))
        for ep, says in cases:
            with self.assertRaises(ValueError) as cm:
                ringkernel.Client(ep)
            self.assertIn(says, str(cm.exception))

        async def main():
            with self.assertRaises(ValueError):
                ringkernel.AsyncClient("localhost:5601")
        asyncio.run(main())
        for ep in ("tcp://[::1]:5555", "tcp://127.0.0.1:5555", "inproc://x", "ipc:///tmp/x"):
            ringkernel.Client(ep, timeout=1).close()  # well formed: connects in the background
        # the sample client: one line and exit status 2, no traceback
        sample = os.path.join(os.path.dirname(os.path.abspath(__file__)), *[".."] * 4, "samples", "python",
                              "client.py")
        if os.path.exists(sample):  # the source tree
            p = subprocess.run([sys.executable, sample, "-e", "localhost:5601"], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
            self.assertIn("client.py: cannot connect to localhost:5601: no transport", p.stderr)


class ShutdownTest(unittest.TestCase):
    def test_shutting_down_and_busy(self):
        # BUSY: a 2 MiB arena holds one 128 Ki-element vadd at a time, and
        # nothing waits for room
        b = Bridge("--arena-bytes", "2M", "--admission-ms", "0")
        try:
            with ringkernel.Client(b.ep, timeout=20) as rk:
                v = np.ones(131072, dtype="<f4")
                # a client slower than the bridge (a sanitizer build) may
                # not overrun the arena in one burst: up to 5 of them
                errs = []
                for _ in range(5):
                    futs = [rk.call_async("vadd", a=v, b=v) for _ in range(100)]
                    errs += [f.exception() for f in futs]
                    if any(isinstance(e, ringkernel.Busy) for e in errs):
                        break
                self.assertTrue(any(isinstance(e, ringkernel.Busy) for e in errs))
                self.assertTrue(all(e is None or isinstance(e, ringkernel.Busy) for e in errs))
                # SHUTTING_DOWN: requests after SIGTERM, while they keep coming
                b.p.send_signal(signal.SIGTERM)
                for _ in range(2000):
                    try:
                        rk.call("echo", data=b"x", timeout=5)
                    except ringkernel.ShuttingDown as e:
                        self.assertEqual(e.code, "SHUTTING_DOWN")
                        break
                else:
                    self.fail("no SHUTTING_DOWN")
        finally:
            self.assertEqual(b.stop(), 0)


if __name__ == "__main__":
    if not BRIDGE:
        print("skip: RK_BRIDGE names no rk-bridge")
        sys.exit(77)
    unittest.main(verbosity=2)
