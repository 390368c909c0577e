"""ringkernel - the Python client of rk-bridge (protocol v1.1,
bridge/PROTOCOL.md): pure Python over pyzmq and msgpack (Debian:
python3-zmq, python3-msgpack; numpy is optional).

    import numpy as np, ringkernel
    with ringkernel.Client("tcp://127.0.0.1:5555") as rk:
        print(rk.ping())                                  # "cpu" or "cuda"
        a = np.arange(4, dtype="<f4")
        c = rk.call("vadd", a=a, b=a).array("c")          # any actor by name
        futs = [rk.call_async("echo", data=b"x") for _ in range(100)]
        print([f.result()["data"] for f in futs][:3])
        print(rk.actors())                                # [Actor(name='echo', ...), ...]

Errors are exceptions: one class per protocol error code under
RingkernelError (InvalidArgument, UnknownOp, TooLarge, ...), and Timeout.
AsyncClient is the asyncio flavour."""
from .aio import AsyncClient
from .client import DEFAULT_ENDPOINT, Client
from .errors import (ActorFailed, Busy, ClientClosed, DeviceFault, Internal, InvalidArgument,
                     LaunchInvalid, Malformed, PermissionDenied, ProtocolError, RingkernelError,
                     ShuttingDown, Timeout, TooLarge, UnknownOp, UnsupportedVersion)
from .wire import BUILTIN_ACTORS, Actor, Reply

__version__ = "0.2.0"  # the project's version (meson.build); the package's test checks it

__all__ = [
    "Client", "AsyncClient", "Reply", "Actor", "BUILTIN_ACTORS", "DEFAULT_ENDPOINT",
    "RingkernelError", "Malformed", "UnsupportedVersion", "UnknownOp", "InvalidArgument",
    "TooLarge", "Busy", "LaunchInvalid", "DeviceFault", "ActorFailed", "PermissionDenied",
    "ShuttingDown", "Internal", "Timeout", "ClientClosed", "ProtocolError",
]
