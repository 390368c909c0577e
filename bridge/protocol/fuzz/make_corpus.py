#!/usr/bin/python3
"""Write the seed corpus for fuzz_request into bridge/protocol/fuzz/corpus/.

Valid requests for every op, each protocol error row the codec decides, and
the hostile frames the bounded pre-scan must refuse. Run from anywhere:
    /usr/bin/python3 bridge/protocol/fuzz/make_corpus.py
The generated files are committed; rerun after editing this script.
"""
import os
import struct

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def p(obj):
    return msgpack.packb(obj, use_bin_type=True)


def f32(*xs):
    return struct.pack("<%df" % len(xs), *xs)


def req(op, **kw):
    d = {"v": 1, "id": 7, "op": op}
    d.update(kw)
    return d


cases = {
    # valid, one per op
    "ok_ping": p(req("ping")),
    "ok_status": p(req("status")),
    "ok_echo": p(req("echo", data=b"hello")),
    "ok_echo_empty": p(req("echo", data=b"")),
    "ok_vadd": p(req("vadd", a=f32(1, 2, 3), b=f32(4, 5, 6))),
    "ok_vadd_nan": p(req("vadd", a=f32(float("nan")), b=f32(float("inf")))),
    "ok_launch": p(req("launch", grid=0, block=256, smem=1024)),
    "ok_unknown_keys": p({"op": "ping", "extra": [1, {"x": None}], "v": 1, "id": 2**64 - 1}),
    "ok_id_int8": bytes([0x83, 0xa1, 0x76, 0x01, 0xa2, 0x69, 0x64, 0xd0, 0x05,
                         0xa2, 0x6f, 0x70, 0xa4]) + b"ping",
    "ok_ext_value": p(req("ping", x=msgpack.ExtType(5, b"abc"))),
    # MALFORMED
    "bad_empty": b"",
    "bad_garbage": b"hello, bridge\xc1\xff",
    "bad_c1": b"\xc1",
    "bad_array": p([1, 2, 3]),
    "bad_int": p(42),
    "bad_trailing": p(req("ping")) + b"\x00",
    "bad_two_maps": p(req("ping")) * 2,
    "bad_bin_4gib": bytes([0x81, 0xa4]) + b"data" + b"\xc6\xff\xff\xff\xff" + b"abc",
    "bad_str_4gib": bytes([0x81, 0xdb, 0xff, 0xff, 0xff, 0xff]) + b"x",
    "bad_deep_100000": b"\x81\xa1x" + b"\x91" * 100000 + b"\xc0",
    "bad_array32_huge": b"\x81\xa1x\xdd\xff\xff\xff\xff\x00",
    "bad_map_million_header": b"\xdf" + struct.pack(">I", 1000000) + b"\xa1k\x00" * 8,
    "bad_elements_5000": p({"v": 1, "id": 1, "op": "ping", "x": [0] * 5000}),
    "bad_truncated": p(req("echo", data=b"hello"))[:-2],
    "bad_truncated_header": b"\x81\xa1x\xcd\x01",
    "bad_int_key": b"\x81\x01\x02",
    # UNSUPPORTED_VERSION
    "ver_missing": p({"id": 1, "op": "ping"}),
    "ver_2": p({"v": 2, "id": 1, "op": "ping"}),
    "ver_str": p({"v": "1", "id": 1, "op": "ping"}),
    "ver_float": p({"v": 1.0, "id": 1, "op": "ping"}),
    "ver_negative": p({"v": -1, "id": 1, "op": "ping"}),
    # id
    "id_missing": p({"v": 1, "op": "ping"}),
    "id_negative": p({"v": 1, "id": -5, "op": "ping"}),
    "id_str": p({"v": 1, "id": "7", "op": "ping"}),
    # UNKNOWN_OP
    "op_missing": p({"v": 1, "id": 1}),
    "op_int": p({"v": 1, "id": 1, "op": 3}),
    "op_unknown": p(req("fly")),
    "op_nul": p(req("ping\x00")),
    # INVALID_ARGUMENT
    "echo_no_data": p(req("echo")),
    "echo_data_str": p(req("echo", data="hello")),
    "vadd_mismatch": p(req("vadd", a=f32(1, 2, 3), b=f32(1, 2))),
    "vadd_not4": p(req("vadd", a=b"\x00" * 6, b=b"\x00" * 6)),
    "vadd_empty": p(req("vadd", a=b"", b=b"")),
    "vadd_missing_b": p(req("vadd", a=f32(1))),
    "vadd_a_array": p(req("vadd", a=[1.0], b=f32(1))),
    "launch_neg_grid": p(req("launch", grid=-1, block=1, smem=0)),
    "launch_str_grid": p(req("launch", grid="1", block=1, smem=0)),
    "launch_no_smem": p(req("launch", grid=1, block=1)),
    "launch_float_block": p(req("launch", grid=1, block=1.5, smem=0)),
}
# Duplicate `id` keys (first wins): str first, then uint.
cases["id_dup"] = (b"\x84\xa1v\x01\xa2id\xa1x\xa2id\x05\xa2op\xa4ping")

os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.unlink(os.path.join(OUT, old))
for name, data in sorted(cases.items()):
    with open(os.path.join(OUT, name), "wb") as fh:
        fh.write(data)
print("wrote %d files to %s" % (len(cases), OUT))
