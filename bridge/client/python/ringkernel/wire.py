"""ringkernel.wire - requests and replies as msgpack (bridge/PROTOCOL.md),
shared by Client and AsyncClient. Internal."""
import collections
import numbers
import time
import warnings

import msgpack
import zmq

from . import errors

RESERVED = ("v", "id", "op")
#: What the bridge decodes (bridge/PROTOCOL.md, "Decoder limits"): more is
#: MALFORMED with id nil, a reply that would go to another request waiting.
MAX_OBJECTS = 4096
MAX_DEPTH = 16
#: Fields a request carries: the map, and a key and a value for v, id, op
#: and each field (as librkc's limit).
MAX_FIELDS = (MAX_OBJECTS - 1) // 2 - 3

Actor = collections.namedtuple("Actor", "name inputs outputs gpu cpu")
Actor.__doc__ = """An actor's signature from ``status``: its name, the names of
its input and output fields (tuples of str), and whether it runs on the GPU
and on the CPU."""

#: The built-in actors' signatures, for a bridge older than protocol 1.1
#: (its status has no ``actors``).
BUILTIN_ACTORS = (
    Actor("echo", ("data",), ("data",), True, True),
    Actor("vadd", ("a", "b"), ("c",), True, True),
)


class Reply(dict):
    """A successful reply: a dict of its fields besides ``v``, ``id`` and
    ``ok`` (an actor's outputs are ``bytes``), with the request's ``id``, its
    ``op`` and ``rtt`` (the round trip in seconds)."""

    __slots__ = ("id", "op", "rtt")

    def array(self, name, dtype="<f4"):
        """Field ``name`` as a read-only numpy array of ``dtype`` (default
        little-endian float32), without a copy. Needs numpy."""
        import numpy
        return numpy.frombuffer(self[name], dtype=dtype)


def _field(name, value):
    if name in RESERVED:
        raise ValueError("field %r is the protocol's own key" % name)
    if isinstance(value, (bytes, str, int, float, bool)) or value is None:
        return value
    if isinstance(value, numbers.Integral):  # numpy's integer scalars: ints, not their 8 bytes
        return int(value)
    try:  # bytearray, memoryview, numpy arrays, array.array: their bytes
        mv = memoryview(value)
    except TypeError:
        if isinstance(value, (list, tuple, dict)):
            return value
        raise TypeError("field %r: %s is not bytes-like (bytes, bytearray, memoryview, a numpy "
                        "array) nor a msgpack value" % (name, type(value).__name__)) from None
    return mv.cast("B") if mv.c_contiguous else mv.tobytes()


def _objects(v, depth, deepest):
    """The msgpack objects of v at depth (the request map is 1), counted as
    the bridge does; deepest[0] gets the deepest level reached (counted no
    deeper than one past the limit: a cycle ends there)."""
    deepest[0] = max(deepest[0], depth)
    if depth > MAX_DEPTH:
        return 1
    if isinstance(v, dict):
        return 1 + sum(_objects(k, depth + 1, deepest) + _objects(x, depth + 1, deepest) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return 1 + sum(_objects(x, depth + 1, deepest) for x in v)
    return 1


def _check_limits(msg):
    """Refuses a request map the bridge would not decode, with the value
    and the limit (ValueError)."""
    deepest = [0]
    n = _objects(msg, 1, deepest)
    if len(msg) - 3 > MAX_FIELDS:
        raise ValueError("%d fields: a request carries at most %d (the bridge decodes at most %d msgpack "
                         "objects)" % (len(msg) - 3, MAX_FIELDS, MAX_OBJECTS))
    if deepest[0] > MAX_DEPTH:
        raise ValueError("the request nests more than %d levels deep (the request map is level 1): the "
                         "bridge reads at most %d" % (MAX_DEPTH, MAX_DEPTH))
    if n > MAX_OBJECTS:
        raise ValueError("the request is %d msgpack objects (every key, value and element counted): the bridge "
                         "decodes at most %d" % (n, MAX_OBJECTS))


def request(rid, op, fields, kw):
    """The body frame of a request: {v: 1, id, op, fields...}."""
    if not isinstance(op, str) or not op:
        raise ValueError("op must be a non-empty str, not %r" % (op,))
    msg = {"v": 1, "id": rid, "op": op}
    for src in (fields or {}, kw):
        for k, v in src.items():
            if k in msg:
                raise ValueError("field %r is %s" % (k, "given twice" if k not in RESERVED
                                                      else "the protocol's own key"))
            msg[k] = _field(k, v)
    _check_limits(msg)
    return msgpack.packb(msg, use_bin_type=True)


def message(rid, msg):
    """The body frame of a raw request map (``v`` defaults to 1; ``id`` is the client's)."""
    m = {"v": msg.get("v", 1), "id": rid}  # id early: error replies can echo it
    m.update((k, v) for k, v in msg.items() if k not in ("v", "id"))
    _check_limits(m)
    return msgpack.packb(m, use_bin_type=True)


def parse(frame):
    """(the reply frame as a dict, None), or (None, a ProtocolError) when it
    is not a msgpack map (made, not raised, as in outcome)."""
    try:
        rep = msgpack.unpackb(frame, raw=False)
    except Exception as e:  # msgpack raises several types
        return None, errors.ProtocolError("a reply of %d bytes is not msgpack: %s" % (len(frame), e))
    if not isinstance(rep, dict):
        return None, errors.ProtocolError("a reply is a %s, not a map" % type(rep).__name__)
    return rep, None


def outcome(rep, op, rtt):
    """(Reply, None) for an ok reply, (None, the error) for a failed one. The
    error is made, not raised: it carries no traceback of the thread that
    read the reply (a traceback holds frames, and a test framework that
    clears frames would finalize a reader coroutine)."""
    rid = rep.get("id")
    if rep.get("ok") is not True:
        err = rep.get("error")
        err = err if isinstance(err, dict) else {}
        code = err.get("code")
        # not a str (a broken peer): no code, as librkc reads it (a list
        # raised TypeError in the I/O thread, which then died)
        return None, errors.error_for(code if isinstance(code, str) else "INTERNAL",
                                      err.get("message", "the bridge's error reply has no message"), rid, op)
    r = Reply((k, v) for k, v in rep.items() if k not in ("v", "id", "ok"))
    r.id, r.op, r.rtt = rid, op, rtt
    return r, None


def match(frame, take):
    """Reads a reply frame and finds its request: ``take(id)`` pops the
    pending ``(future, op, t0)`` of that id, or of the oldest request when
    id is None (a reply without a readable id). Returns ``(future, Reply,
    None)``, ``(future, None, error)``, or None when no request waits for
    it (it came after its request timed out)."""
    rep, exc = parse(frame)
    rid = rep.get("id") if rep is not None else None
    got = take(rid if isinstance(rid, int) else None)
    if got is None:
        return None
    fut, op, t0 = got
    value = None
    if rep is not None:
        value, exc = outcome(rep, op, time.monotonic() - t0)
    return fut, value, exc


def actors(status, endpoint):
    """The actors of a status reply as Actor tuples. A bridge older than
    protocol 1.1 reports none: then the built-in actors' signatures, with a
    warning."""
    lst = status.get("actors")
    if lst is None:
        warnings.warn("the bridge at %s does not report its actors (older than protocol 1.1); "
                      "returning the built-in actors' signatures" % endpoint, stacklevel=3)
        return list(BUILTIN_ACTORS)
    return [Actor(a["name"], tuple(a.get("inputs", ())), tuple(a.get("outputs", ())),
                  bool(a.get("gpu")), bool(a.get("cpu"))) for a in lst]


def check_timeout(timeout):
    """The constructor's timeout: positive seconds or None."""
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive seconds or None, not %r" % (timeout,))
    return timeout


def timeout_error(op, rid, endpoint, seconds):
    return errors.Timeout("no reply to %s (id %s) from %s within %g s (is rk-bridge running there? "
                          "With CURVE on, a client whose key is not allowed gets no reply either)"
                          % (op, rid, endpoint, seconds), id=rid, op=op)


def endpoint_problem(endpoint):
    """What is wrong with an endpoint to connect to, as a sentence, or None
    when it is well formed: the rules of librkc and rk-bridge
    (bridge/protocol/endpoint.c), so that a malformed one is not just
    ZeroMQ's "Invalid argument"."""
    forms = "tcp://HOST:PORT, ipc://PATH or inproc://NAME"
    if "://" not in endpoint:
        hint = " (tcp://%s?)" % endpoint if ":" in endpoint and "/" not in endpoint else ""
        return "no transport: an endpoint is %s%s" % (forms, hint)
    scheme, rest = endpoint.split("://", 1)
    if scheme == "tcp":
        host, colon, port = rest.rsplit(";", 1)[-1].rpartition(":")
        if not colon or "]" in port:  # [::1] without a port
            return "no port: tcp:// needs HOST:PORT, e.g. tcp://127.0.0.1:5555"
        if not host:
            return "no host: tcp:// needs HOST:PORT, e.g. tcp://127.0.0.1:5555"
        if host == "*":
            return "host * (every interface) is for binding: connect to a host, e.g. tcp://127.0.0.1:%s" % port
        if not (port.isdigit() and len(port) <= 5 and 1 <= int(port) <= 65535):
            return "port %r is not a number from 1 to 65535" % port
    elif scheme in ("ipc", "inproc"):
        if not rest:
            return "no %s: %s:// needs one" % ("path" if scheme == "ipc" else "name", scheme)
    else:
        return "unknown transport %s:// (the bridge serves tcp://, ipc:// and inproc://)" % scheme
    return None


def setup(sock, endpoint, server_key, secret_key):
    """Socket options (no linger, high-water marks) and CURVE, then connect.
    Keys are Z85 (40 characters, str or bytes). A malformed endpoint is a
    ValueError that says what is wrong with it."""
    why = endpoint_problem(endpoint) if isinstance(endpoint, str) else None
    if why:
        raise ValueError("cannot connect to %s: %s" % (endpoint, why))
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 100000)
    sock.setsockopt(zmq.RCVHWM, 100000)
    if server_key is not None or secret_key is not None:
        if server_key is None or secret_key is None:
            raise ValueError("CURVE needs both server_key and secret_key")
        enc = lambda k: k.encode() if isinstance(k, str) else bytes(k)
        sock.curve_serverkey = enc(server_key)
        sock.curve_secretkey = enc(secret_key)
        sock.curve_publickey = zmq.curve_public(enc(secret_key))
    try:
        sock.connect(endpoint)
    except zmq.ZMQError as e:  # what the check above does not foresee
        raise ValueError("cannot connect to %s: %s" % (endpoint, e)) from None
