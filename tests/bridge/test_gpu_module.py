#!/usr/bin/python3
"""samples/gpu_module/sample_actors.so (built with nvcc from one list,
rk/gpu_actor.cuh) deployed into rk-bridge with --actors and called by name
from the ringkernel Python package: samples/gpu_module/check_sample_actors.py
says what each backend must answer.

    test_gpu_module.py RK_BRIDGE MODULE CHECK PYTHON_PACKAGE_DIR [BRIDGE ARGS...]

With `--backend cuda` among the bridge's arguments it needs a GPU (exit 77
without one). Exit 0 pass, 1 fail, 77 skip (pyzmq, msgpack or numpy
missing)."""
import os
import subprocess
import sys

try:
    import msgpack  # noqa: F401
    import numpy  # noqa: F401
    import zmq  # noqa: F401
except ImportError as e:  # meson reads 77 as skipped
    print("skip: %s" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_interop import Bridge  # noqa: E402

bridge_path, module, check, pydir = sys.argv[1:5]
extra = sys.argv[5:]
if "cuda" in extra and not os.path.exists("/dev/nvidia0"):
    print("skip: no GPU (/dev/nvidia0)")
    sys.exit(77)
b = Bridge(bridge_path, "--actors", module, *extra)
try:
    spin = ["--spin"] if "--request-deadline-ms" in extra else []
    rc = subprocess.call([sys.executable, check, b.ep, "--client-path", pydir] + spin, timeout=600)
    # bridge/README.md's rk-client line for this saxpy, as written there
    client = os.path.join(os.path.dirname(bridge_path), "rk-client")
    out = subprocess.run([client, "-e", b.ep, "call", "saxpy", "a=f32:2", "x=f32:1,2,3", "y=f32:10,20,30",
                          "-f", "f32"], capture_output=True, text=True, timeout=60)
    print(out.stdout + out.stderr, end="")
    if out.returncode != 0 or "y: f32:12,24,36" not in out.stdout:
        print("FAIL: bridge/README.md's `rk-client call saxpy` line")
        rc = rc or 1
finally:
    b.stop()
sys.exit(rc)
