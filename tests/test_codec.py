"""The value codec: exact round trips, corruption detection, user types, no pickle."""

from __future__ import annotations

import enum
import math
import pathlib
import re
import struct
import gc
import subprocess
import sys
import threading
import zlib
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stores import codec
from stores.codec import decode, encode, register_codec, unregister_codec
from stores.payload_reader import PayloadReader
from stores.errors import (CodecRegistrationError, CorruptValue, FormatVersionError,
                           StoreError)

STORES_DIR = pathlib.Path(__file__).resolve().parent.parent / "stores"


# ------------------------------------------------------------ equality

def float_bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same(a, b) -> bool:
    """Exact equality: same types all the way down, floats bit for bit,
    dict order kept."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return float_bits(a) == float_bits(b)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(same(ka, kb) and same(va, vb)
                                        for (ka, va), (kb, vb) in zip(a.items(), b.items()))
    if type(a) in (set, frozenset):
        if len(a) != len(b):
            return False
        rest = list(b)
        for x in a:
            for i, y in enumerate(rest):
                if same(x, y):
                    del rest[i]
                    break
            else:
                return False
        return True
    return a == b


# ---------------------------------------------------------- strategies

any_float_bits = st.integers(0, 2**64 - 1).map(
    lambda n: struct.unpack("<d", struct.pack("<Q", n))[0])  # every NaN payload too
floats = st.floats(allow_nan=True, allow_infinity=True) | any_float_bits | st.sampled_from(
    [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308])
ints = st.integers() | st.integers(min_value=-2**300, max_value=2**300) | st.sampled_from(
    [-2**63 - 1, -2**63, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -2**64])
scalars = (st.none() | st.booleans() | ints | floats | st.text(max_size=20)
           | st.binary(max_size=20))
# Hashable values without floats (set elements: NaN makes set comparison meaningless).
plain_hashables = st.recursive(
    st.none() | st.booleans() | ints | st.text(max_size=8) | st.binary(max_size=8),
    lambda c: st.lists(c, max_size=3).map(tuple) | st.frozensets(c, max_size=3),
    max_leaves=6)
keys = plain_hashables | floats | st.lists(floats, max_size=2).map(tuple)
values = st.recursive(
    scalars,
    lambda c: (st.lists(c, max_size=5)
               | st.lists(c, max_size=5).map(tuple)
               | st.dictionaries(keys, c, max_size=5)
               | st.sets(plain_hashables, max_size=4)
               | st.frozensets(plain_hashables, max_size=4)),
    max_leaves=25)

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# -------------------------------------------------------------- round trip

@SETTINGS
@given(values)
def test_round_trip_is_exact(value):
    blob = encode(value)
    assert isinstance(blob, bytes)
    assert same(decode(blob), value)


@SETTINGS
@given(floats)
def test_floats_are_bit_exact(x):
    y = decode(encode(x))
    assert type(y) is float and float_bits(y) == float_bits(x)


@pytest.mark.parametrize("x", [0.0, -0.0, math.inf, -math.inf, math.nan,
                               struct.unpack("<d", bytes.fromhex("0100000000f8ff7f"))[0],
                               struct.unpack("<d", bytes.fromhex("efbeadde00fff0ff"))[0]])
def test_special_floats(x):
    assert float_bits(decode(encode(x))) == float_bits(x)


@SETTINGS
@given(st.integers(min_value=-2**2000, max_value=2**2000))
def test_big_ints(n):
    out = decode(encode(n))
    assert type(out) is int and out == n


def test_tuples_and_lists_stay_apart():
    value = [(1, [2, (3,)]), [(), []], ((),), {"t": (1, 2), (1, 2): [1, 2]}]
    out = decode(encode(value))
    assert same(out, value)
    assert type(out[0]) is tuple and type(out[0][1]) is list and type(out[0][1][1]) is tuple
    assert type(out[3][(1, 2)]) is list and type(out[3]["t"]) is tuple


def test_dict_keys_of_any_type_and_order():
    value = {None: 1, True: 2, 3: 3, 2**70: 4, 1.5: 5, "s": 6, b"b": 7, (1, "x"): 8,
             frozenset({1}): 9}
    out = decode(encode(value))
    assert same(out, value)
    assert list(out) == list(value)


def test_bool_is_not_int():
    out = decode(encode([True, 1, False, 0]))
    assert [type(v) for v in out] == [bool, int, bool, int]


def test_bytes_like_encode_as_bytes():
    assert decode(encode(bytearray(b"ab"))) == b"ab"
    assert type(decode(encode(memoryview(b"ab")))) is bytes


def test_deep_nesting():
    value: object = 1
    for i in range(200):
        value = (value,) if i % 2 else [value]
    assert same(decode(encode(value)), value)


def test_concurrent_encoding_from_threads():
    values = [(i, [i, (i, str(i))], {(i,): 2**80 + i}) for i in range(300)]
    errors = []

    def work():
        try:
            for _ in range(5):
                for v in values:
                    assert same(decode(encode(v)), v)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ------------------------------------------------------------- corruption

def make_blob(payload: bytes, version: int = codec.FORMAT_VERSION) -> bytes:
    return struct.pack(">BI", version, zlib.crc32(payload)) + payload


def test_blob_layout():
    blob = encode([1, 2])
    assert blob[0] == codec.FORMAT_VERSION
    assert struct.unpack(">I", blob[1:5])[0] == zlib.crc32(blob[5:])


@SETTINGS
@given(values, st.data())
def test_any_flipped_bit_is_detected(value, data):
    blob = bytearray(encode(value))
    pos = data.draw(st.integers(0, len(blob) - 1))
    bit = data.draw(st.integers(0, 7))
    blob[pos] ^= 1 << bit
    with pytest.raises((CorruptValue, FormatVersionError)):
        decode(bytes(blob))


def test_every_truncation_is_detected():
    blob = encode({"a": [1, 2.5, (3, b"xyz")], "b": 2**100})
    for n in range(len(blob)):
        with pytest.raises(CorruptValue):
            decode(blob[:n])


def test_wrong_version():
    blob = encode("x")
    for version in (0, 2, 255):
        with pytest.raises(FormatVersionError, match=f"version {version}"):
            decode(bytes([version]) + blob[1:])


def test_bad_checksum_message():
    blob = bytearray(encode("hello"))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptValue, match="checksum"):
        decode(bytes(blob))


@pytest.mark.parametrize("payload", [
    b"\xc1",                      # never-used msgpack byte
    b"\x92\x01",                  # array of 2 with one element
    b"\x01\x02",                  # extra data after a value
    b"\xa2\xff\xfe",              # invalid UTF-8 string
    b"\xd4\x05\x00",              # unknown internal extension code 5
    b"\xd4\x50\x00",              # unknown user extension code 80
    b"\xc7\x00\x02",              # empty big-int extension
    b"\x81\x90\x01",              # a list as a map key
])
def test_malformed_payload_with_valid_checksum(payload):
    with pytest.raises(CorruptValue):
        decode(make_blob(payload))


needs_c = pytest.mark.skipif(codec._fast is None, reason="the codec's C decoder is not in use "
                             "(stores._codec not built, or MTA_PURE_PYTHON set)")


# Sizes past each msgpack header's short form (str8/16/32, bin16/32, array16/32, map16/32, ext8/16/32).
long_values = st.one_of(
    st.integers(15, 70_000).map(lambda n: "é" * n), st.integers(15, 70_000).map(lambda n: b"b" * n),
    st.integers(15, 17).flatmap(lambda n: st.lists(scalars, min_size=n, max_size=n)),
    st.integers(15, 17).flatmap(lambda n: st.lists(scalars, min_size=n, max_size=n).map(tuple)),
    st.integers(15, 17).flatmap(lambda n: st.dictionaries(st.integers(), scalars, min_size=n, max_size=n)),
    st.integers(2**64, 2**600), st.sampled_from([list(range(70_000)), tuple(range(70_000)), set(range(300))]))


def _by_msgpack(value):
    """The payload the msgpack path alone gives ``value`` (or its error's type)."""
    fast, codec._fast = codec._fast, None
    try:
        return codec._pack(value)
    except Exception as exc:  # noqa: BLE001 - the verdict compared
        return type(exc)
    finally:
        codec._fast = fast


def _outside_the_c_packer(value) -> bool:
    """Whether ``value`` holds what the C packer leaves to msgpack: an int
    outside 64 bits, a string that is not valid UTF-8, a type that is not
    one of the codec's own exactly."""
    t = type(value)
    if t is int:
        return not -2**63 <= value < 2**64
    if t is str:
        try:
            value.encode()
        except UnicodeEncodeError:
            return True
        return False
    if t in (list, tuple, set, frozenset):
        return any(_outside_the_c_packer(v) for v in value)
    if t is dict:
        return any(_outside_the_c_packer(k) or _outside_the_c_packer(v) for k, v in value.items())
    return t not in (type(None), bool, float, bytes, bytearray)


#: Each side of every boundary between msgpack's forms of an int, a string, bytes, an array, a map and an extension.
_EDGES = ([e + d for e in (-2**63, -2**31, -2**15, -2**7, -2**5, 0, 2**7, 2**8, 2**16, 2**32, 2**63, 2**64)
           for d in (-1, 0, 1) if -2**63 <= e + d < 2**64]
          + ["x" * n for n in (15, 16, 31, 32, 255, 256, 65535, 65536)] + [b"y" * n for n in (255, 256, 65535, 65536)]
          + [list(range(n)) for n in (15, 16)] + [dict.fromkeys(range(n)) for n in (15, 16)]
          + [tuple(range(n)) for n in (0, 1, 2, 3, 6, 7, 14, 15, 200, 30_000)])


@needs_c
@pytest.mark.parametrize("value", _EDGES, ids=lambda v: f"{type(v).__name__}-{v if type(v) is int else len(v)}")
def test_the_c_packer_takes_each_side_of_msgpacks_size_boundaries_as_msgpack_does(value):
    assert codec._fast.pack(value, codec.MAX_NESTING) == _by_msgpack(value)


@needs_c
@SETTINGS
@given(values | long_values | st.lists(long_values, max_size=3).map(tuple)
       | st.lists(st.sampled_from(_EDGES), max_size=4).map(tuple)
       | st.lists(st.sampled_from(["\ud800", "a\udfff", bytearray(b"ab"), memoryview(b"cd"), Fraction(1, 3), 2**70,
                                   True, 1.5]), max_size=3).map(tuple))
def test_the_c_packer_gives_msgpacks_bytes_or_leaves_the_value_to_it(value):
    """The C packer's payload is msgpack's byte for byte; it gives None
    (msgpack packs the value, or refuses it) exactly for the values holding
    what it does not take."""
    fast = codec._fast.pack(value, codec.MAX_NESTING)
    if fast is None:
        assert _outside_the_c_packer(value), value
    else:
        assert fast == _by_msgpack(value)
    want = _by_msgpack(value)
    if isinstance(want, bytes):
        assert encode(value)[codec.HEADER_SIZE:] == want
    else:
        with pytest.raises(want):
            encode(value)


@needs_c
@SETTINGS
@given(values | long_values | st.lists(long_values, max_size=3).map(tuple))
def test_the_c_decoder_decodes_as_msgpack_does(value):
    payload = encode(value)[codec.HEADER_SIZE:]
    assert same(codec._fast.unpack(payload, codec._ext_hook), codec._unpack_msgpack(payload))
    assert same(codec._unpack(payload), value)


@needs_c
@SETTINGS
@given(values, st.lists(st.tuples(st.sampled_from(["set", "cut", "add"]), st.integers(0, 10**6),
                                  st.integers(0, 255)), min_size=1, max_size=3))
@example(value=(-129, -129), damage=[("set", 2, 255)])  # a timestamp header of a length msgpack refuses
def test_the_c_decoder_accepts_nothing_msgpack_refuses(value, damage):
    """Payloads damaged at random (bytes changed, cut off, or added): what
    the C decoder accepts, msgpack decodes to the same value; what it
    refuses, codec._unpack hands to msgpack, whose verdict is reported."""
    payload = bytearray(encode(value)[codec.HEADER_SIZE:])
    for what, at, byte in damage:
        at %= len(payload) + 1
        if what == "set" and at < len(payload):
            payload[at] = byte
        elif what == "cut":
            del payload[at:]
        else:
            payload[at:at] = bytes([byte])
    data = bytes(payload)
    try:
        got = codec._fast.unpack(data, codec._ext_hook, codec.MAX_NESTING, CorruptValue)
    except Exception as refused:  # noqa: BLE001 - refused: msgpack decides (below, through codec._unpack)
        try:
            want = codec._unpack_msgpack(data)
        except Exception as exc:  # noqa: BLE001
            with pytest.raises(Exception) as got:
                codec._unpack(data)
            # the C decoder's own verdict on what it knows is corrupt (a timestamp header, however damaged)
            # stands; any other refusal is msgpack's
            assert type(got.value) is (CorruptValue if isinstance(refused, CorruptValue) else type(exc))
        else:
            assert not isinstance(refused, CorruptValue), "the C decoder called corrupt what msgpack decodes"
            assert same(codec._unpack(data), want)
        return
    assert same(got, codec._unpack_msgpack(data))


@needs_c
def test_a_malformed_map_is_refused_before_any_user_decoder_runs():
    """A map header claiming more entries than the payload holds, then a
    user extension whose decoder fails: msgpack refuses the header, and so
    does the C decoder (the user's decoder is not reached)."""
    code, calls = 77, []

    def fail(v):
        calls.append(v)
        raise KeyError("user decode_fn failed")

    register_codec(Fraction, code, lambda f: (f.numerator, f.denominator), fail)
    try:
        with pytest.raises(CorruptValue, match="malformed payload"):
            decode(make_blob(b"\x8f\x01\xd4" + bytes([code]) + b"\x01" + b"\x01" * 15))
    finally:
        unregister_codec(Fraction)
    assert calls == []


def _nested_tuples(depth: int, inner=1):
    value = inner
    for _ in range(depth):
        value = (value,)
    return value


def _in_child(script: str, *, pure: bool) -> str:
    """``script``'s output, run in a child process (so that a crash of the
    interpreter fails the test instead of ending the run); ``pure``: with
    the pure-Python decoder (MTA_PURE_PYTHON=1)."""
    import os

    env = dict(os.environ, MTA_PURE_PYTHON="1" if pure else "0")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=STORES_DIR.parent, env=env)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout


@pytest.mark.parametrize("pure", [False, True])
def test_values_nested_to_the_limit_round_trip_in_both_decoders_and_deeper_ones_are_refused(pure):
    """Tuples, sets and registered types nest up to MAX_NESTING deep: such a
    value (a big int at its bottom, which is no level) decodes with the C
    decoder and with msgpack's, whose hook recursion would crash the
    interpreter from about 250 levels; one level more is refused when
    encoded, naming the limit, and the encoder goes on working."""
    deepest = _nested_tuples(codec.MAX_NESTING - 2, frozenset({(2**80,)}))
    blob = encode(deepest)
    out = _in_child(f"from stores import codec\nv = codec.decode({blob!r})\nn = 0\n"
                    f"while type(v) is tuple: v, n = v[0], n + 1\nprint(n, codec._fast is None, v)\n", pure=pure)
    assert out.split(maxsplit=2) == [str(codec.MAX_NESTING - 2), str(pure), "frozenset({(1208925819614629174706176,)})\n"]
    with pytest.raises(ValueError, match=f"nested more than {codec.MAX_NESTING} deep"):
        encode(_nested_tuples(codec.MAX_NESTING + 1))
    assert decode(encode((1, (2, [3])))) == (1, (2, [3]))
    # lists do not count, and need not fit the C decoder's recursion: 50 tuples, each holding
    # a list 19 deep, and 3 tuples, each holding a list 400 deep
    for tuples, lists in ((50, 19), (3, 400)):
        value: object = "x"
        for _ in range(tuples):
            for _ in range(lists):
                value = [value]
            value = (value,)
        blob = encode(value)
        out = _in_child(f"from stores import codec\nv, kinds = codec.decode({blob!r}), []\n"
                        "while type(v) in (list, tuple): kinds.append(type(v).__name__); v = v[0]\n"
                        "print(v, len(kinds), kinds.count('tuple'))\n", pure=pure)
        assert out.split() == ["x", str(tuples * (lists + 1)), str(tuples)], (tuples, lists)


#: The start of a child's script: ``blob(codes, tail=b"")``, a crafted
#: blob of one extension per code (the last outermost), each an array of
#: the value inside it (the int 1 innermost) and the msgpack item ``tail``;
#: ``Box``, a class to register.
_CRAFTED = (
    "import struct, zlib\n"
    "from stores import codec\n"
    "from stores.errors import CorruptValue\n"
    "class Box:\n"
    "    def __init__(self, v): self.v = v\n"
    "def blob(codes, tail=b''):\n"
    "    inner = b'\\x01'\n"
    "    for code in codes:\n"
    "        arr = (b'\\x92' if tail else b'\\x91') + inner + tail\n"
    "        inner = b'\\xc9' + struct.pack('>I', len(arr)) + bytes([code]) + arr\n"
    "    return struct.pack('>BI', codec.FORMAT_VERSION, zlib.crc32(inner)) + inner\n")


@pytest.mark.parametrize("pure", [False, True])
def test_a_crafted_payload_nested_5000_deep_is_refused_without_a_crash(pure):
    """Tuples nested 5,000 deep (a crafted payload: the encoder refuses
    values past MAX_NESTING): CorruptValue naming the limit with either
    decoder (both stop at MAX_NESTING), in a child process so that a crash
    of the interpreter fails the test instead of ending the run."""
    if not pure and codec._fast is None:
        pytest.skip("the codec's C decoder is not in use (stores._codec not built, or MTA_PURE_PYTHON set)")
    script = _CRAFTED + (
        "try:\n"
        "    codec.decode(blob([codec.EXT_TUPLE] * 5000))\n"
        "except CorruptValue as exc:\n"
        "    print('refused', 'deep' in str(exc))\n")
    assert _in_child(script, pure=pure).split() == ["refused", "True"]


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("mixed", [False, True], ids=["tuples", "tuples-and-a-registered-type"])
def test_crafted_nesting_is_taken_to_the_limit_and_refused_past_it_by_both_decoders(pure, mixed):
    """A crafted payload nested exactly MAX_NESTING deep decodes and one a
    level deeper is refused (CorruptValue naming the depth), with the C
    decoder as with msgpack's hook; ``mixed``: every other level a
    registered type, so the levels the C decoder builds and those the hook
    builds count together."""
    if not pure and codec._fast is None:
        pytest.skip("the codec's C decoder is not in use (stores._codec not built, or MTA_PURE_PYTHON set)")
    script = _CRAFTED + (
        "codec.register_codec(Box, 70, lambda b: [b.v], lambda v: Box(v[0]))\n"
        "for deep in (codec.MAX_NESTING, codec.MAX_NESTING + 1):\n"
        f"    codes = [70 if {mixed} and level % 2 else codec.EXT_TUPLE for level in range(deep)]\n"
        "    try:\n"
        "        v, n = codec.decode(blob(codes)), 0\n"
        "    except CorruptValue as exc:\n"
        "        print(deep, 'refused', 'deep' in str(exc))\n"
        "        continue\n"
        "    while type(v) in (tuple, Box):\n"
        "        v, n = (v[0] if type(v) is tuple else v.v), n + 1\n"
        "    print(deep, 'decoded', n, v)\n")
    limit = codec.MAX_NESTING
    assert _in_child(script, pure=pure).split() == [str(limit), "decoded", str(limit), "1",
                                                    str(limit + 1), "refused", "True"]


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("limit", [None, 1_000_000], ids=["default-limit", "raised-limit"])
def test_lists_and_maps_nested_past_msgpacks_depth_are_refused_naming_it(pure, limit):
    """Lists or maps nested MAX_PAYLOAD_DEPTH deep decode, one level more
    (up to 400,000: one byte a level) is refused (CorruptValue naming the
    depth), with either decoder, whatever the recursion limit: the C
    decoder counts the depth, so a limit raised past what the C stack holds
    does not crash it (a child process, so that a crash fails the test)."""
    if not pure and codec._fast is None:
        pytest.skip("the codec's C decoder is not in use (stores._codec not built, or MTA_PURE_PYTHON set)")
    script = (
        "import struct, sys, zlib\n"
        "from stores import codec\n"
        "from stores.errors import CorruptValue\n"
        f"if {limit}: sys.setrecursionlimit({limit})\n"
        "for head in (b'\\x91', b'\\x81\\xc0'):\n"
        "    for n in (codec.MAX_PAYLOAD_DEPTH, codec.MAX_PAYLOAD_DEPTH + 1, 400_000):\n"
        "        payload = head * n + b'\\xc0'\n"
        "        try:\n"
        "            v, depth = codec.decode(struct.pack('>BI', 1, zlib.crc32(payload)) + payload), 0\n"
        "        except CorruptValue as exc:\n"
        "            print(n, 'refused', f'more than {codec.MAX_PAYLOAD_DEPTH} deep' in str(exc))\n"
        "            continue\n"
        "        while v is not None:\n"
        "            v, depth = (v[0] if type(v) is list else v[None]), depth + 1\n"
        "        print(n, 'decoded', depth)\n")
    deepest = codec.MAX_PAYLOAD_DEPTH
    assert _in_child(script, pure=pure).split() == [str(deepest), "decoded", str(deepest),
                                                    str(deepest + 1), "refused", "True",
                                                    "400000", "refused", "True"] * 2


@needs_c
def test_a_value_deeper_than_the_c_decoder_goes_is_decoded_by_msgpack_on_a_small_stack():
    """20 tuples each holding lists 1,000 deep, decoded in a thread of 1 MiB
    of stack with the recursion limit raised: the C decoder stops at its own
    depth (MAX_C_DEPTH) instead of recursing 20,000 levels, and msgpack
    decodes the value, a payload at a time (a child process, so that a
    crash fails the test)."""
    script = (
        "import struct, sys, threading, zlib\n"
        "from stores import codec\n"
        "inner = b'\\xc0'\n"
        "for _ in range(20):\n"
        "    arr = b'\\x91' * 1000 + inner\n"
        "    inner = b'\\xc9' + struct.pack('>I', len(arr)) + bytes([codec.EXT_TUPLE]) + arr\n"
        "blob = struct.pack('>BI', 1, zlib.crc32(inner)) + inner\n"
        "sys.setrecursionlimit(1_000_000)\n"
        "threading.stack_size(1 << 20)\n"
        "out = []\n"
        "def decode():\n"
        "    v, kinds = codec.decode(blob), []\n"
        "    while type(v) in (list, tuple): kinds.append(type(v).__name__); v = v[0]\n"
        "    out.extend([v, len(kinds), kinds.count('tuple')])\n"
        "t = threading.Thread(target=decode)\n"
        "t.start()\n"
        "t.join()\n"
        "print(*out)\n")
    assert _in_child(script, pure=False).split() == ["None", "20000", "20"]


#: msgpack's timestamp (extension -1) in each form msgpack decodes: fixext
#: 4 and 8, ext 8 of 12 bytes, ext 16 of 4, ext 32 of 8.
_TIMESTAMPS = [b"\xd6\xff\x00\x00\x00\x01", b"\xd7\xff" + bytes(8), b"\xc7\x0c\xff" + bytes(12),
               b"\xc8\x00\x04\xff" + bytes(4), b"\xc9\x00\x00\x00\x08\xff" + bytes(8)]


@pytest.mark.parametrize("pure", [False, True])
def test_msgpack_timestamps_are_refused_as_corrupt(pure):
    """Extension -1, msgpack's timestamp, which encode never writes and
    msgpack decodes itself (past the codec's hook), is refused with either
    decoder: alone, in a list, as a map key or value, in a tuple's payload.
    A registered type's decode_fn may still return a timestamp, and bytes
    holding a timestamp's header are no timestamp."""
    import msgpack

    fast = codec._fast
    if not pure and fast is None:
        pytest.skip("the codec's C decoder is not in use (stores._codec not built, or MTA_PURE_PYTHON set)")
    if pure:
        codec._fast = None
    try:
        for ts in _TIMESTAMPS:
            for payload in (ts, b"\x92\x01" + ts, b"\x81" + ts + b"\x01", b"\x81\x01" + ts,
                            b"\xc7" + bytes([1 + len(ts), codec.EXT_TUPLE]) + b"\x91" + ts):
                with pytest.raises(CorruptValue, match="extension code -1"):
                    decode(make_blob(payload))
        register_codec(Fraction, 90, lambda f: f.numerator, lambda n: msgpack.Timestamp(n, 0))
        value = [b"\xd6\xff\x00\x00\x00\x01", Fraction(3), [Fraction(4)], {"k": b"\xd7\xff" + bytes(8)}]
        assert decode(encode(value)) == [value[0], msgpack.Timestamp(3, 0), [msgpack.Timestamp(4, 0)], value[3]]
    finally:
        codec._fast = fast
        unregister_codec(Fraction)


@needs_c
def test_a_payload_the_c_decoder_cannot_take_is_decoded_again_once_not_at_every_level():
    """Registered types nested 40 deep, each holding after its inner value a
    list 900 deep (past the C decoder's recursion once the levels above
    are counted): the C decoder fails deep inside, and msgpack decodes the
    whole value once; retried at each level instead, it would take 2**40
    decodes (a child process, so that the test fails on the timeout)."""
    script = _CRAFTED + (
        "codec.register_codec(Box, 70, lambda b: [b.v], lambda v: Box(v))\n"
        "v, n = codec.decode(blob([70] * 40, b'\\x91' * 900 + b'\\xc0')), 0\n"
        "while type(v) is Box:\n"
        "    v, n = v.v[0], n + 1\n"
        "print(n, v)\n")
    assert _in_child(script, pure=False).split() == ["40", "1"]


@needs_c
def test_the_c_decoder_builds_what_records_hold_and_hands_the_rest_to_the_hook(point_codec):
    value = [(1.5, (2,)), {(3, "k"): frozenset({4})}, {5}, 2**100, Point(1, 2), -2**63, 2**64 - 1]
    payload = encode(value)[codec.HEADER_SIZE:]
    codes = []

    def hook(code, data, levels):
        codes.append(code)
        return codec._ext_hook(code, data, levels)

    assert same(codec._fast.unpack(payload, hook), value)
    assert sorted(codes) == [codec.EXT_BIGINT, codec.registered_codecs()[Point]]  # tuples, sets: built in C


def _untrackable(value) -> bool:
    """The oracle of codec.untrack: an untracked value stays so, a list,
    dict, tuple, set or frozenset is untracked when all its items are,
    anything else tracked stays tracked."""
    if type(value) in (list, tuple, set, frozenset):
        return all([_untrackable(v) for v in value])
    if type(value) is dict:
        return all([_untrackable(k) and _untrackable(v) for k, v in value.items()])
    return not gc.is_tracked(value)


def _containers(value):
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        out.append(v)
        todo.extend(v if type(v) in (list, tuple, set, frozenset) else
                    [*v.keys(), *v.values()] if type(v) is dict else ())
    return out


@needs_c
@SETTINGS
@given(values | st.lists(long_values, max_size=3).map(tuple))
def test_the_c_decoder_builds_untracked_the_tuples_the_collector_would_untrack(value):
    """A tuple whose items are all atomic values or untracked tuples comes
    out of the C decoder untracked, as CPython's collector leaves it after
    the first collection it survives (a window's record and level groups
    hold thousands, which young collections would walk first); a tuple
    holding any other container stays tracked, a dict too, even one
    untracked for now (a tracked value put in it later tracks it again,
    never the tuple); the value is unchanged.  The collector is off while
    decoding, so only the decoder untracks.  A cycle through a decoded
    tuple's dict is collected."""
    gc.disable()
    try:
        decoded = decode(encode(value))
        for c in _containers(decoded):
            if type(c) is tuple:
                safe = all(not gc.is_tracked(item) and type(item) not in (list, dict, set, frozenset)
                           for item in c)
                assert gc.is_tracked(c) is not safe, c
    finally:
        gc.enable()
    assert same(decoded, value)


@needs_c
def test_a_cycle_through_a_decoded_tuples_dict_is_collected():
    import weakref

    held = decode(encode(({}, 1.5)))
    node = _Tracked()
    held[0]["node"], node.back = node, held
    gone = weakref.ref(node)
    del held, node
    gc.collect()
    assert gone() is None


class _Tracked:
    """An instance the collector tracks (it has a __dict__)."""


@needs_c
@SETTINGS
@given(values, st.booleans())
def test_untrack_untracks_exactly_the_containers_of_untracked_items_and_changes_no_value(value, with_instance):
    decoded = decode(encode(value))
    if with_instance:
        decoded = [decoded, [_Tracked()], [1.5, "x"]]
    expected = {id(c): _untrackable(c) for c in _containers(decoded)}
    assert codec.untrack(decoded) is expected[id(decoded)]
    assert not (with_instance and expected[id(decoded)])
    for c in _containers(decoded):
        assert gc.is_tracked(c) is not expected[id(c)], c
    assert same(decoded[0] if with_instance else decoded, value)


_MUTATED_WHILE_WALKED = r"""
import gc
from stores import _codec as c

class Boom:
    def __init__(self):
        self.me = self  # a cycle: freed by a collection, running __del__

    def __del__(self):
        ran.append(walking[0])
        if walking[0]:
            mutate()

ran, walking = [], [False]
outcomes = []
for threshold in range(1, 7):
    for case in ("dict", "set"):
        if case == "dict":  # values freed while the walk is inside them
            value = {frozenset({i, -i - 1}): [[float(i)] * 3] for i in range(200)}
            mutate = value.clear
        else:  # the set grows while it is iterated
            value = {frozenset({i, -i - 1}) for i in range(200)}
            mutate = lambda: value.add(frozenset({"new", len(value)}))
        gc.collect()
        gc.disable()
        Boom()
        gc.set_threshold(threshold, 1000, 1000)
        walking[0] = True
        gc.enable()  # the walk's first allocations (a set's iterator) collect the Boom
        result = c.untrack(value)
        walking[0] = False
        gc.set_threshold(700, 10, 10)
        outcomes.append((case, result, gc.is_tracked(value)))
print(any(ran), all(type(r) is bool and r is not tracked for _, r, tracked in outcomes), outcomes)
"""


@needs_c
def test_untrack_survives_a_finalizer_changing_what_it_walks():
    """A set's iterator is allocated, so a collection, and a finalizer, may
    run in the middle of the walk and clear a dict or grow a set being
    walked: no crash, no exception, and what comes back untracked is
    untracked."""
    out = _in_child(_MUTATED_WHILE_WALKED, pure=False).split(" ", 2)
    assert out[:2] == ["True", "True"], out


def test_untrack_without_the_c_extension_untracks_nothing():
    fast, codec._fast = codec._fast, None
    try:
        value = [[1.0, 2.0], {"a": [3]}]
        assert codec.untrack(value) is False
        assert all(gc.is_tracked(c) for c in (value, value[0], value[1], value[1]["a"]))
    finally:
        codec._fast = fast


def test_errors_are_store_errors_and_value_errors():
    assert issubclass(CorruptValue, StoreError) and issubclass(CorruptValue, ValueError)
    assert issubclass(FormatVersionError, StoreError)


def test_decode_needs_bytes():
    with pytest.raises(TypeError):
        decode("not bytes")  # type: ignore[arg-type]


# ----------------------------------------------------------- unknown types

class Color(enum.IntEnum):
    RED = 1


class MyFloat(float):
    pass


@pytest.mark.parametrize("value", [object(), Fraction(1, 3), Color.RED, MyFloat(1.0),
                                   [1, {"k": Fraction(1, 2)}], 1j])
def test_unknown_types_raise_clear_type_error(value):
    with pytest.raises(TypeError, match="register_codec") as info:
        encode(value)
    inner = value[1]["k"] if isinstance(value, list) else value
    assert type(inner).__qualname__ in str(info.value)


# ------------------------------------------------------------- user types

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)

    def __hash__(self):
        return hash((self.x, self.y))


@pytest.fixture
def point_codec():
    register_codec(Point, 70, lambda p: (p.x, p.y), lambda v: Point(*v))
    yield
    unregister_codec(Point)


def test_user_type_round_trip(point_codec):
    value = {Point(1, 2): [Point(3.5, (4,)), (Point(0, 0),)]}
    out = decode(encode(value))
    assert out == value
    assert type(out[Point(1, 2)][1]) is tuple and type(out[Point(1, 2)][0].y) is tuple


def test_registration_errors(point_codec):
    with pytest.raises(CodecRegistrationError, match="already registered"):
        register_codec(Point, 71, lambda p: 0, lambda v: 0)

    class Other:
        pass

    with pytest.raises(CodecRegistrationError, match="already used by Point"):
        register_codec(Other, 70, lambda p: 0, lambda v: 0)
    for code in (0, 1, 63, 128, -1, True, "70"):
        with pytest.raises(CodecRegistrationError, match="out of range"):
            register_codec(Other, code, lambda p: 0, lambda v: 0)
    for native in (int, float, tuple, dict, list, str, bytes, set, frozenset, bool):
        with pytest.raises(CodecRegistrationError, match="natively"):
            register_codec(native, 100, lambda p: 0, lambda v: 0)
    with pytest.raises(CodecRegistrationError):
        register_codec(Other, 72, "nope", lambda v: 0)  # type: ignore[arg-type]
    assert codec.registered_codecs() == {Point: 70}
    assert issubclass(CodecRegistrationError, ValueError)


def test_unregistered_code_on_decode(point_codec):
    blob = encode(Point(1, 2))
    unregister_codec(Point)
    with pytest.raises(CorruptValue, match="code 70"):
        decode(blob)
    register_codec(Point, 70, lambda p: (p.x, p.y), lambda v: Point(*v))
    assert decode(blob) == Point(1, 2)


def test_user_decoder_errors_propagate():
    class Boom(Exception):
        pass

    class Thing:
        pass

    def bad_decode(v):
        raise Boom("decoder bug")

    register_codec(Thing, 99, lambda t: 1, bad_decode)
    try:
        with pytest.raises(Boom):
            decode(encode([Thing()]))
    finally:
        unregister_codec(Thing)


def test_subclass_of_registered_type_is_not_matched(point_codec):
    class SubPoint(Point):
        pass

    with pytest.raises(TypeError, match="SubPoint"):
        encode(SubPoint(1, 2))


# ------------------------------------------------------------------ pickle

PICKLE_RE = re.compile(
    r"^\s*(import|from)\s+(c?pickle|_pickle|dill|cloudpickle|marshal|shelve|jsonpickle)\b"
    r"|__import__\(\s*['\"](c?pickle|_pickle|dill|cloudpickle|marshal|shelve)"
    r"|import_module\(\s*['\"](c?pickle|_pickle|dill|cloudpickle|marshal|shelve)"
    r"|\b(c?pickle|dill|cloudpickle|marshal)\.(loads?|dumps?)\b"
    r"|PickleTranscoder|LegacyTranscoder|FMT_PICKLE",
    re.MULTILINE)


def test_no_pickle_anywhere_in_stores():
    files = sorted(STORES_DIR.rglob("*.py"))
    assert len(files) >= 6
    offenders = [f"{f.name}: {m.group(0).strip()}" for f in files
                 for m in PICKLE_RE.finditer(f.read_text())]
    assert not offenders, offenders


def test_no_pickle_in_the_spark_windows_state():
    """Window state Spark's state store keeps (periodic panes, waiting rows)
    is data read back from a store: spark_ops encodes it, never pickles."""
    files = sorted((STORES_DIR.parent / "spark_ops").rglob("*.py"))
    assert any(f.name == "panes.py" for f in files)
    offenders = [f"{f.name}: {m.group(0).strip()}" for f in files
                 for m in PICKLE_RE.finditer(f.read_text())]
    assert not offenders, offenders


def test_codec_and_local_stores_do_not_load_pickle():
    code = ("import sys, tempfile\n"
            "import stores\n"
            "from stores import encode, decode, open_store\n"
            "assert decode(encode({(1,): [2.5, 2**99]})) == {(1,): [2.5, 2**99]}\n"
            "for url in ('memory://', tempfile.mkdtemp()):\n"
            "    with open_store(url) as s:\n"
            "        s.write_pairs('w', 0, 0, 0, [encode(1)])\n"
            "        s.cas_meta('w', None, encode('m'))\n"
            "print(sorted(m for m in sys.modules if 'pickle' in m))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=STORES_DIR.parent, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_bound_values_decode_only_at_their_place():
    here, there = b"w\0" + bytes(24), b"v\0" + bytes(24)
    blob = encode((3, [1.5, "x"]), bind=here)
    assert blob[0] == codec.BOUND_FORMAT_VERSION
    assert decode(blob, bind=here) == (3, [1.5, "x"])
    with pytest.raises(CorruptValue, match="copied from another window or position"):
        decode(blob, bind=there)
    with pytest.raises(FormatVersionError, match="bound to a place"):
        decode(blob)  # a bound value read as a free one
    with pytest.raises(FormatVersionError, match="version 1, not bound"):
        decode(encode((3, [])), bind=here)  # written before values were bound: a clear refusal


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.text(max_size=5), values), max_size=20), st.lists(values, max_size=20))
def test_encode_map_of_packed_values_is_encode_byte_for_byte(items, entries):
    """A map assembled from separately packed values (the window metadata's
    checkpoints kept packed) is the blob encode gives the dict, and a list's
    items come back packed from the blob."""
    d = dict(items)
    d["list"] = list(entries)
    parts = [codec.packed(e) for e in entries]
    blob = codec.encode_map([(k, codec.packed_list(parts) if k == "list" else codec.packed(v)) for k, v in d.items()])
    assert blob == encode(d)
    assert _list_items(blob, "list") == parts


@pytest.mark.parametrize("n", [0, 15, 16, 65535, 65536])
def test_packed_list_and_encode_map_headers_at_every_size(n):
    items = [(i, codec.packed(float(i))) for i in range(n)]
    assert codec.encode_map(items) == encode({i: float(i) for i in range(n)})
    parts = [codec.packed(i) for i in range(n)]
    assert codec.encode_map([("x", codec.packed_list(parts))]) == encode({"x": list(range(n))})
    assert _list_items(encode({"y": 1, "x": list(range(n))}), "x") == parts


def _list_items(blob, key):
    """The payloads of the items of the list under ``key`` in the map
    ``blob`` holds, walked with stores.payload_reader.PayloadReader."""
    reader = PayloadReader(blob)
    for _ in range(reader.map_header()):
        if reader.value() == key:
            return [reader.skip() for _ in range(reader.array_header())]
        reader.skip()
    raise KeyError(key)
