"""ringkernel.errors - one exception class per error code of the bridge
protocol (bridge/PROTOCOL.md, "Replies"), and the client's own.

Every exception is a :class:`RingkernelError` carrying ``code`` (the
protocol's string, what programs branch on), ``message`` (the bridge's
sentence for a person), ``id`` (the request's id, when known) and ``op``
(the operation called)."""

__all__ = [
    "RingkernelError", "Malformed", "UnsupportedVersion", "UnknownOp", "InvalidArgument",
    "TooLarge", "Busy", "LaunchInvalid", "DeviceFault", "ActorFailed", "PermissionDenied",
    "ShuttingDown", "Internal", "Timeout", "ClientClosed", "ProtocolError", "error_for",
]


class RingkernelError(Exception):
    """Base class: a request that did not succeed. ``code`` is the protocol's
    error code (a class of its own for every code the protocol names; a code
    this version does not know comes as a plain RingkernelError with that
    code)."""

    code = None

    def __init__(self, message, code=None, id=None, op=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.id = id
        self.op = op

    def __str__(self):
        return "%s: %s" % (self.code, self.message)


class Malformed(RingkernelError):
    """The request frame is not a single msgpack map the bridge can read."""
    code = "MALFORMED"


class UnsupportedVersion(RingkernelError):
    """``v`` is missing or not 1."""
    code = "UNSUPPORTED_VERSION"


class UnknownOp(RingkernelError):
    """No operation (actor) of that name; the message lists the known ones."""
    code = "UNKNOWN_OP"


class InvalidArgument(RingkernelError):
    """A field is missing, of the wrong type, or of a size the actor refuses."""
    code = "INVALID_ARGUMENT"


class TooLarge(RingkernelError):
    """The request is larger than the message limit or the arena; the message
    names both sizes."""
    code = "TOO_LARGE"


class Busy(RingkernelError):
    """Back-pressure: the bridge could not queue the request in time; retry later."""
    code = "BUSY"


class LaunchInvalid(RingkernelError):
    """A ``launch`` exceeds the device's grid, block or shared-memory limits."""
    code = "LAUNCH_INVALID"


class DeviceFault(RingkernelError):
    """The request faulted its worker twice, or the backend failed for good."""
    code = "DEVICE_FAULT"


class ActorFailed(RingkernelError):
    """The actor ran and returned an error of its own (v1.1)."""
    code = "ACTOR_FAILED"


class PermissionDenied(RingkernelError):
    """An admin operation from a client that is not an admin (v1.1)."""
    code = "PERMISSION_DENIED"


class ShuttingDown(RingkernelError):
    """The bridge is stopping."""
    code = "SHUTTING_DOWN"


class Internal(RingkernelError):
    """A bug in the bridge (it logged the details)."""
    code = "INTERNAL"


class Timeout(RingkernelError, TimeoutError):
    """No reply within the timeout (client side: the bridge is not running
    there, is overloaded, or CURVE refused this client). Also a
    TimeoutError."""
    code = "TIMEOUT"


class ClientClosed(RingkernelError):
    """The client was closed before the reply came."""
    code = "CLOSED"


class ProtocolError(RingkernelError):
    """A reply the client cannot read (not a msgpack map as the protocol says)."""
    code = "PROTOCOL"


_BY_CODE = {cls.code: cls for cls in (
    Malformed, UnsupportedVersion, UnknownOp, InvalidArgument, TooLarge, Busy, LaunchInvalid,
    DeviceFault, ActorFailed, PermissionDenied, ShuttingDown, Internal)}


def error_for(code, message, id=None, op=None):
    """The exception for a protocol error code (RingkernelError for a code
    this version does not know)."""
    return _BY_CODE.get(code, RingkernelError)(message, code=code, id=id, op=op)
