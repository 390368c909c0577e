"""ringkernel.aio - AsyncClient: the asyncio client of rk-bridge
(zmq.asyncio), for programs that run an event loop."""
import asyncio
import collections
import time

import zmq
import zmq.asyncio

from . import errors, wire
from .client import DEFAULT_ENDPOINT

_DEFAULT = object()


class AsyncClient:
    """Like :class:`~ringkernel.Client`, with coroutines::

        async with ringkernel.AsyncClient(endpoint) as rk:
            replies = await asyncio.gather(*(rk.call("echo", data=b) for b in blocks))

    Every call awaited concurrently is in flight at once (pipelining on one
    DEALER socket); replies are matched by id. Use it from one event loop
    (the one that first calls it)."""

    def __init__(self, endpoint=DEFAULT_ENDPOINT, timeout=5.0, *, server_key=None, secret_key=None,
                 context=None):
        self.endpoint = endpoint
        self.timeout = wire.check_timeout(timeout)
        self._sock = (context or zmq.asyncio.Context.instance()).socket(zmq.DEALER)
        try:
            wire.setup(self._sock, endpoint, server_key, secret_key)
        except Exception:
            self._sock.close()
            raise
        self._pending = collections.OrderedDict()  # id -> (future, op, t0)
        self._next_id = 1
        self._reader = None
        self._closed = False
        self.late_replies = 0

    async def call(self, op, fields=None, /, *, timeout=_DEFAULT, **kw):
        """Calls ``op`` with ``fields`` and keyword fields (as
        :meth:`Client.call`); returns the Reply or raises the reply's error
        class, or :class:`Timeout`."""
        return await self._call(op, lambda rid: wire.request(rid, op, fields, kw), timeout)

    async def request(self, msg, *, timeout=_DEFAULT):
        """Sends a request map as it is (``v`` defaults to 1, ``id`` is the
        client's) and returns its Reply."""
        return await self._call(msg.get("op"), lambda rid: wire.message(rid, msg), timeout)

    async def ping(self, *, timeout=_DEFAULT):
        """The bridge's backend, "cuda" or "cpu"."""
        return (await self.call("ping", timeout=timeout))["backend"]

    async def status(self, *, timeout=_DEFAULT):
        """The bridge's ``status`` reply."""
        return await self.call("status", timeout=timeout)

    async def actors(self, *, timeout=_DEFAULT):
        """The actors the bridge serves (as :meth:`Client.actors`)."""
        return wire.actors(await self.status(timeout=timeout), self.endpoint)

    async def close(self):
        """Closes the socket; calls still waiting fail with ClientClosed."""
        if self._closed:
            return
        self._closed = True
        if self._reader:
            self._reader.cancel()
            try:
                await self._reader
            except asyncio.CancelledError:
                pass
        for fut, op, _ in self._pending.values():
            if not fut.done():
                fut.set_exception(errors.ClientClosed("the client was closed before the reply came", op=op))
        self._pending.clear()
        self._sock.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _call(self, op, encode, timeout):
        if self._closed:
            raise errors.ClientClosed("the client is closed", op=op)
        t = self.timeout if timeout is _DEFAULT else timeout
        rid = self._next_id
        self._next_id += 1
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending[rid] = (fut, op, time.monotonic())
        if self._reader is None or self._reader.done():
            self._reader = loop.create_task(self._read())
        try:
            # one deadline for the send and the wait (as Client's)
            end = None if t is None else time.monotonic() + t
            # the empty delimiter first (client.py says why)
            await asyncio.wait_for(self._sock.send_multipart([b"", encode(rid)], copy=False), t)
            left = None if end is None else max(0.0, end - time.monotonic())
            return await asyncio.wait_for(asyncio.shield(fut), left)
        except asyncio.TimeoutError:
            raise wire.timeout_error(op, rid, self.endpoint, t) from None
        finally:
            self._pending.pop(rid, None)

    def _take(self, rid):
        if rid is None:  # id-less: the oldest call still waiting
            rid = next(iter(self._pending), None)
        return self._pending.pop(rid, None)

    async def _read(self):
        while True:
            got = wire.match((await self._sock.recv_multipart())[-1], self._take)
            if got is None:
                self.late_replies += 1
                continue
            fut, value, exc = got
            if fut.done():
                continue
            if exc:
                fut.set_exception(exc)
            else:
                fut.set_result(value)
