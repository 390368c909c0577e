"""ringkernel.client - Client: a thread-safe, pipelining client of rk-bridge
over one ZeroMQ DEALER socket, run by a background I/O thread."""
import collections
import concurrent.futures
import heapq
import itertools
import os
import struct
import threading
import time

import zmq

from . import errors, wire

DEFAULT_ENDPOINT = "tcp://127.0.0.1:5555"
_DEFAULT = object()
_wake_ids = itertools.count()
_STOP = b"stop"


class Client:
    """A client of one rk-bridge.

    ``Client(endpoint, timeout=5.0, server_key=None, secret_key=None)``
    connects in the background (a bridge that is not up yet is reached when
    it comes up); a malformed endpoint (no ``tcp://``, no port) is a
    ValueError saying what is wrong. ``timeout`` (seconds, None: wait
    forever) is the default for every call; ``server_key`` and
    ``secret_key`` (Z85 text) turn CURVE on. Use it as a context manager or
    call :meth:`close`.

    Any actor is called by name with its fields as keywords (here
    samples/gpu_module's saxpy: a, x, y -> y)::

        with ringkernel.Client("tcp://127.0.0.1:5555") as rk:
            y = rk.call("saxpy", a=np.float32([2]), x=x, y=y).array("y")

    Field values: bytes-like objects and numpy arrays are sent as msgpack
    bin (their bytes as they are in memory: use little-endian dtypes such
    as ``"<f4"``); str, int (numpy's integer scalars too), float, bool and
    None as msgpack values. A field whose name is a keyword of the method
    (``timeout``) goes in the ``fields`` dict instead.

    Every method may be called from any number of threads at once. Replies
    are matched to requests by id; a reply that carries no id (the bridge
    could not read it) goes to the oldest request still waiting."""

    def __init__(self, endpoint=DEFAULT_ENDPOINT, timeout=5.0, *, server_key=None, secret_key=None,
                 context=None):
        self.endpoint = endpoint
        self.timeout = wire.check_timeout(timeout)
        self._ctx = context or zmq.Context.instance()
        self._lock = threading.Lock()
        self._pending = collections.OrderedDict()  # id -> (future, op, t0)
        self._next_id = 1
        self._closed = False
        self.late_replies = 0  # replies that came after their request timed out
        self._sock = self._ctx.socket(zmq.DEALER)
        self._inbox = self._ctx.socket(zmq.PULL)
        self._outbox = self._ctx.socket(zmq.PUSH)
        try:
            wire.setup(self._sock, endpoint, server_key, secret_key)
            addr = "inproc://ringkernel-client-%d-%d" % (os.getpid(), next(_wake_ids))
            for s in (self._inbox, self._outbox):
                s.setsockopt(zmq.LINGER, 0)
                s.setsockopt(zmq.SNDHWM, 0)
                s.setsockopt(zmq.RCVHWM, 0)
            self._inbox.bind(addr)
            self._outbox.connect(addr)
        except Exception:
            for s in (self._sock, self._inbox, self._outbox):
                s.close()
            raise
        self._thread = threading.Thread(target=self._run, name="ringkernel-io", daemon=True)
        self._thread.start()

    # ---- calls ------------------------------------------------------------

    def call(self, op, fields=None, /, *, timeout=_DEFAULT, **kw):
        """Calls ``op`` (an actor or operation name) with ``fields`` (a dict)
        and keyword fields; waits for its reply and returns it as a
        :class:`~ringkernel.wire.Reply`. Raises the error class of the reply's
        code (:class:`InvalidArgument`, ...), or :class:`Timeout`."""
        return self._wait(self.call_async(op, fields, timeout=timeout, **kw), timeout)

    def call_async(self, op, fields=None, /, *, timeout=_DEFAULT, **kw):
        """Sends the request and returns at once a
        :class:`concurrent.futures.Future` of its Reply; the future fails
        with the reply's error class, or :class:`Timeout` when no reply came
        within ``timeout``. Send many, then collect them: pipelining."""
        return self._submit(op, lambda rid: wire.request(rid, op, fields, kw), timeout)

    def request(self, msg, *, timeout=_DEFAULT):
        """Sends a request map as it is (``v`` defaults to 1; ``id`` is set by
        the client) and returns a Future of its Reply. For keys beyond an
        actor's fields (tracing) and for testing a bridge."""
        return self._submit(msg.get("op"), lambda rid: wire.message(rid, msg), timeout)

    def ping(self, *, timeout=_DEFAULT):
        """The bridge's backend, "cuda" or "cpu" (a round trip without the runtime)."""
        return self.call("ping", timeout=timeout)["backend"]

    def status(self, *, timeout=_DEFAULT):
        """The bridge's ``status`` reply (backend, device, kernel, limits,
        actors, worker, counters, ...: bridge/PROTOCOL.md), as a Reply."""
        return self.call("status", timeout=timeout)

    def actors(self, *, timeout=_DEFAULT):
        """The actors the bridge serves, as a list of
        :class:`~ringkernel.wire.Actor` (name, inputs, outputs, gpu, cpu). A
        bridge older than protocol 1.1 does not report them: then the
        built-in actors' signatures, with a warning."""
        return wire.actors(self.status(timeout=timeout), self.endpoint)

    def close(self):
        """Stops the I/O thread and closes the socket; requests still waiting
        fail with :class:`ClientClosed`. Calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:  # an I/O thread gone (its inbox closed) would block this for good
                self._outbox.send(_STOP, zmq.NOBLOCK)
            except zmq.Again:
                pass
        self._thread.join()
        self._outbox.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- callers' side ------------------------------------------------------

    def _seconds(self, timeout):
        return self.timeout if timeout is _DEFAULT else timeout

    def _submit(self, op, encode, timeout):
        t = self._seconds(timeout)
        fut = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise errors.ClientClosed("the client is closed", op=op)
            rid = self._next_id
            self._next_id += 1
        body = encode(rid)  # outside the lock: big payloads do not hold up other threads
        now = time.monotonic()
        head = struct.pack("<Qd", rid, now + t if t is not None else 0.0)
        with self._lock:
            if self._closed:
                raise errors.ClientClosed("the client is closed", op=op)
            self._pending[rid] = (fut, op, now)
            self._outbox.send_multipart([head, body], copy=False)
        return fut

    def _wait(self, fut, timeout):
        t = self._seconds(timeout)
        try:
            # the I/O thread fails the future at its deadline; the margin
            # only guards against that thread being gone
            return fut.result(None if t is None else t + 5.0)
        except concurrent.futures.TimeoutError as e:
            if isinstance(e, errors.RingkernelError):
                raise
            raise wire.timeout_error("a request", None, self.endpoint, t) from None

    # ---- the I/O thread ---------------------------------------------------

    def _take(self, rid):
        with self._lock:
            if rid is None and self._pending:
                rid = next(iter(self._pending))
            return self._pending.pop(rid, None)

    @staticmethod
    def _settle(fut, value, exc):
        if not fut.set_running_or_notify_cancel():
            return  # the caller cancelled it
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    def _deliver(self, frame):
        got = wire.match(frame, self._take)
        if got is None:
            self.late_replies += 1
        else:
            self._settle(*got)

    def _expire(self, heap):
        now = time.monotonic()
        while heap and heap[0][0] <= now:
            deadline, rid = heapq.heappop(heap)
            got = self._take(rid)
            if got:
                fut, op, t0 = got
                self._settle(fut, None, wire.timeout_error(op, rid, self.endpoint, round(deadline - t0, 3)))

    def _run(self):
        poller = zmq.Poller()
        poller.register(self._inbox, zmq.POLLIN)
        poller.register(self._sock, zmq.POLLIN)
        heap, backlog = [], collections.deque()
        try:
            while self._loop_once(poller, heap, backlog):
                pass
        finally:
            with self._lock:
                left = list(self._pending.values())
                self._pending.clear()
            for fut, op, _ in left:
                self._settle(fut, None, errors.ClientClosed("the client was closed before the reply came",
                                                            op=op))
            self._sock.close()
            self._inbox.close()

    def _loop_once(self, poller, heap, backlog):
        wait = None if not heap else max(0.0, heap[0][0] - time.monotonic()) * 1000
        poller.modify(self._sock, zmq.POLLIN | (zmq.POLLOUT if backlog else 0))
        events = dict(poller.poll(wait))
        if self._inbox in events:
            while True:
                try:
                    frames = self._inbox.recv_multipart(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                if len(frames) == 1:  # _STOP
                    return False
                rid, deadline = struct.unpack("<Qd", frames[0].bytes)
                if deadline:
                    heapq.heappush(heap, (deadline, rid))
                backlog.append((rid, frames[1]))
        while backlog:
            rid, body = backlog[0]
            if rid in self._pending:  # not timed out while waiting to go
                try:
                    # the empty delimiter first, as REQ sends it: the
                    # reply then finds its way back through any broker
                    self._sock.send_multipart([b"", body], zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
            backlog.popleft()
        if events.get(self._sock, 0) & zmq.POLLIN:
            while True:
                try:
                    frame = self._sock.recv_multipart(zmq.NOBLOCK)[-1]
                except zmq.Again:
                    break
                self._deliver(frame)
        self._expire(heap)
        return True
