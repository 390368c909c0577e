#!/usr/bin/python3
"""Deploying actor modules into a running rk-bridge (SIGHUP), from pyzmq +
msgpack, CPU backend, default worker-process isolation.

    test_deploy.py PATH-TO-rk-bridge MODULE_BUILD_DIR MODULE_DIR [BRIDGE ARGS...]
    test_deploy.py PATH-TO-rk-bridge --gpu SAMPLE_ACTORS.so [BRIDGE ARGS...]

The bridge serves a directory (--actors DIR) that starts with mod_math.so.
While a client keeps 64 echoes in flight the whole time, the directory
changes and SIGHUP deploys it:
  1. mod_a.so added (installed: a new file): `upper` is served by name and
     listed in status, `twice` still is;
  2. mod_bad_duplicate.so added (it declares saxpy again): the deploy is
     refused, the log names both files, the previous set serves on;
  3. the bad module and mod_math.so removed: `twice` is UNKNOWN_OP,
     `upper` is served.
Every echo of the client gets exactly one reply, ok, whatever the deploys
did; the counters say 2 deploys and 1 failure. And a request still running
after --drain-ms gives a deploy up (nothing changes, it is answered).

--gpu (CUDA backend, samples/gpu_module): the GPU module is deployed again
(SIGHUP, the same file) under the same load: `count`'s device-resident
total starts over (a fresh worker loaded the module's kernel), `saxpy`
still answers, every echo once; the log says how long requests were held.
Exit 0 pass, 1 fail, 77 skip (pyzmq or msgpack missing, or no GPU)."""
import os
import shutil
import signal
import sys
import threading
import time

try:
    import msgpack
    import zmq
except ImportError as e:  # meson reads 77 as skipped
    print("skip: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_interop import Bridge, req, sock  # noqa: E402
from test_interop import call_op as call  # noqa: E402


def install(src, dst_dir):
    """As install(1) does: a new file renamed into place, never a write
    into a file a running bridge may have loaded."""
    tmp = os.path.join(dst_dir, ".tmp-" + os.path.basename(src))
    shutil.copyfile(src, tmp)
    os.rename(tmp, os.path.join(dst_dir, os.path.basename(src)))


class Load(threading.Thread):
    """64 echoes in flight until stopped; counts what came back."""

    def __init__(self, ctx, ep):
        super().__init__(daemon=True)
        self.s = sock(ctx, zmq.DEALER, ep)
        self.stop = threading.Event()
        self.sent = self.got = 0
        self.bad = []

    def run(self):
        pending = set()
        while not self.stop.is_set() or pending:
            while not self.stop.is_set() and len(pending) < 64:
                self.sent += 1
                pending.add(self.sent)
                self.s.send_multipart([b"", req("echo", self.sent, data=b"%d" % self.sent)])
            try:
                rep = msgpack.unpackb(self.s.recv_multipart()[-1], raw=False)
            except zmq.Again:
                self.bad.append("no reply within the timeout; %d pending" % len(pending))
                return
            i = rep.get("id")
            if i not in pending or not rep.get("ok") or rep.get("data") != b"%d" % i:
                self.bad.append(rep)
            pending.discard(i)
            self.got += 1

    def finish(self):
        """Stops sending, waits for the replies owed; each came once."""
        self.stop.set()
        self.join(60)
        assert not self.is_alive(), "the load client hangs"
        assert not self.bad, self.bad[:5]
        assert self.got == self.sent and self.sent > 64, (self.sent, self.got)


def close_all(b, ctx, s, load):
    """The sockets, then the bridge (SIGTERM); its log."""
    load.stop.set()
    s.close()
    load.s.close()
    ctx.term()
    return b.stop()


def counters(s, id_):
    rep = call(s, "status", id_)
    assert rep["ok"], rep
    return rep["counters"], [a["name"] for a in rep["actors"]]


def wait_for(s, key, want, what):
    for k in range(400):  # 20 s
        c, names = counters(s, 900000 + k)
        if c[key] >= want:
            return c, names
        time.sleep(0.05)
    raise AssertionError("%s: counters.%s stayed %d (want %d)" % (what, key, c[key], want))


def count(s, id_, add):
    rep = call(s, "count", id_, add=add.to_bytes(8, "little"))
    assert rep["ok"], rep
    return int.from_bytes(rep["total"], "little")


def gpu(bridge_path, sample):
    if not os.path.exists("/dev/nvidia0"):  # (as test_gpu_module.py)
        print("skip: no GPU (/dev/nvidia0)")
        return 77
    b = Bridge(bridge_path, "--actors", sample, *sys.argv[4:])
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, b.ep)
    load = Load(ctx, b.ep)
    try:
        st = call(s, "status", 1)
        if st["backend"] != "cuda":
            print("skip: the bridge runs on %s (%s)" % (st["backend"], st["backend_why"]))
            return 77
        assert [count(s, 10 + k, k) for k in (1, 2, 3)] == [1, 3, 6]
        load.start()
        time.sleep(0.3)
        b.p.send_signal(signal.SIGHUP)
        wait_for(s, "deploys", 1, "the GPU module's deploy")
        assert count(s, 20, 5) == 5, "count's device state did not start over"
        rep = call(s, "saxpy", 21, a=b"\0\0\0@", x=b"\0\0\x80?" * 4, y=b"\0\0\x80?" * 4)  # 2 * 1 + 1
        assert rep["ok"] and rep["y"] == b"\0\0@@" * 4, rep
        time.sleep(0.3)
        load.finish()
    finally:
        text = close_all(b, ctx, s, load)
    held = [ln for ln in text.splitlines() if "requests held" in ln]
    assert held, "the log lacks the deploy"
    print("deploy (cuda): %d echoes, all answered once; %s" % (load.sent, held[0]))
    return 0


def drain_timeout(bridge_path, mod_dir, case_dir):
    """A request still running after --drain-ms gives the deploy up: the
    modules are unchanged, the request is answered; the next SIGHUP, with
    nothing running, deploys."""
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "rkdeploy-drain-%d" % os.getpid())
    os.makedirs(d)
    install(os.path.join(mod_dir, "mod_slow.so"), d)
    b = Bridge(bridge_path, "--actors", d, "--drain-ms", "300", *sys.argv[4:])
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, b.ep)
    try:
        s.send_multipart([b"", req("slow", 1, ms=(1500).to_bytes(4, "little"))])
        time.sleep(0.1)  # it runs
        install(os.path.join(case_dir, "mod_a.so"), d)
        b.p.send_signal(signal.SIGHUP)
        c, names = wait_for(s, "deploy_failures", 1, "the deploy given up")
        assert c["deploys"] == 0 and "upper" not in names, (c, names)
        replies = {}
        while 1 not in replies:
            rep = msgpack.unpackb(s.recv_multipart()[-1], raw=False)
            replies[rep["id"]] = rep
        assert replies[1]["ok"] and replies[1]["ms"] == (1500).to_bytes(4, "little"), replies[1]
        b.p.send_signal(signal.SIGHUP)
        wait_for(s, "deploys", 1, "the deploy after it")
        assert call(s, "upper", 2, text=b"ok")["text"] == b"OK"
    finally:
        s.close()
        ctx.term()
        text = b.stop()
        shutil.rmtree(d, ignore_errors=True)
    assert "deploy given up: requests still in flight after --drain-ms 300" in text, "the log lacks the give-up"


def main():
    if sys.argv[2] == "--gpu":
        return gpu(sys.argv[1], sys.argv[3])
    drain_timeout(*sys.argv[1:4])
    bridge_path, mod_dir, case_dir = sys.argv[1:4]
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "rkdeploy-%d" % os.getpid())
    os.makedirs(d)
    install(os.path.join(mod_dir, "mod_math.so"), d)
    b = Bridge(bridge_path, "--actors", d, *sys.argv[4:])
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, b.ep)
    load = Load(ctx, b.ep)
    ok = False
    try:
        assert call(s, "twice", 1, data=b"ab")["data"] == b"aabb"
        assert call(s, "upper", 2, text=b"x")["error"]["code"] == "UNKNOWN_OP"
        load.start()
        time.sleep(0.2)

        install(os.path.join(case_dir, "mod_a.so"), d)
        b.p.send_signal(signal.SIGHUP)
        c, names = wait_for(s, "deploys", 1, "deploy 1")
        assert "upper" in names and "twice" in names, names
        rep = call(s, "upper", 3, text=b"MiXed")
        assert rep["ok"] and rep["text"] == b"MIXED", rep
        assert call(s, "twice", 4, data=b"q")["data"] == b"qq"

        install(os.path.join(mod_dir, "mod_bad_duplicate.so"), d)
        b.p.send_signal(signal.SIGHUP)
        c, names = wait_for(s, "deploy_failures", 1, "deploy 2 (refused)")
        assert c["deploys"] == 1, c
        assert "upper" in names and "twice" in names, names
        assert call(s, "twice", 5, data=b"r")["data"] == b"rr"

        os.unlink(os.path.join(d, "mod_bad_duplicate.so"))
        os.unlink(os.path.join(d, "mod_math.so"))
        b.p.send_signal(signal.SIGHUP)
        c, names = wait_for(s, "deploys", 2, "deploy 3")
        assert "twice" not in names and "upper" in names, names
        rep = call(s, "twice", 6, data=b"s")
        assert not rep["ok"] and rep["error"]["code"] == "UNKNOWN_OP", rep
        assert call(s, "upper", 7, text=b"up")["text"] == b"UP"
        time.sleep(0.2)
        load.finish()
        c, _ = counters(s, 8)
        assert c["deploys"] == 2 and c["deploy_failures"] == 1, c
        ok = True
    finally:
        text = close_all(b, ctx, s, load)
        shutil.rmtree(d, ignore_errors=True)
    for want in ("requests held", "deploy failed", "is also declared by module", "mod_bad_duplicate.so"):
        assert want in text, "the log lacks %r" % want
    print("deploy: %d echoes through 3 deploys, all answered once" % load.sent)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
