"""Value codec: msgpack with explicit extension types, never pickle.

``encode(value) -> bytes`` and ``decode(blob) -> value`` round-trip exactly:

* ``None``, ``bool``, ``str``, ``bytes`` -- native msgpack types;
* ``int`` of any size -- native in ``[-2**63, 2**64)``, else extension 2
  (two's-complement big-endian bytes);
* ``float`` -- msgpack float 64, bit for bit (``-0.0``, infinities and NaN
  payloads survive);
* ``list`` stays a list; ``tuple`` stays a tuple (extension 1);
  ``set`` and ``frozenset`` (extensions 3 and 4);
* ``dict`` with keys of any of these (hashable) types, insertion order kept;
* any nesting of the above (tuples, sets and registered types at most
  :data:`MAX_NESTING` deep);
* user types registered with :func:`register_codec` (codes 64..127).

Exact types only (msgpack ``strict_types``): a subclass of ``int``,
``float``, ``str``, ``list``, ``dict``, ... (``numpy.float64``, ``IntEnum``,
``OrderedDict``) is refused with a ``TypeError`` unless registered, so that
nothing silently comes back as a different type.  ``bytearray`` and
``memoryview`` are encoded as ``bytes`` and decode as ``bytes``.

Blob layout::

    byte 0      format version: 1 (free), 2 (bound to a place)
    bytes 1..4  CRC32 of the payload (format 2: of the place's bytes, then
                the payload), big-endian
    bytes 5..   msgpack payload

A value encoded with ``bind=place`` (format 2) decodes only with the same
``place``: the level queues bind each stored group to its window, epoch,
level and index, so a valid value copied to another key (another window, or
another position of the same one) fails its checksum instead of being read
as data.  The place is not stored, only checked.

:func:`decode` raises :class:`~stores.errors.FormatVersionError` for an
unknown version byte, or a free value where a bound one is expected (and the
other way round), and :class:`~stores.errors.CorruptValue` for a bad
checksum, a truncated blob or malformed msgpack.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from typing import Any, Callable

import msgpack

from . import codec_timestamps
from .errors import CodecRegistrationError, CorruptValue, FormatVersionError

try:  # the decoder and packer in C (stores/_codec.c), built at install when a C compiler is present
    from . import _codec as _fast
except ImportError:
    _fast = None
if os.environ.get("MTA_PURE_PYTHON", "") not in ("", "0"):
    _fast = None  # as mta.native: the pure-Python paths alone
#: Whether values are packed in C: packing a record whole then costs less
#: than finding which of its parts were packed before
#: (:mod:`stores.window_packing`, through :func:`packed_in_c`).
PACKS_IN_C = _fast is not None

FORMAT_VERSION = 1
#: Format of a value bound to its place (see the module docstring).
BOUND_FORMAT_VERSION = 2
_HEADER = struct.Struct(">BI")
HEADER_SIZE = _HEADER.size  # 5

# Extension type codes.  0..63 are reserved for this module, 64..127 for users.
EXT_TUPLE = 1
EXT_BIGINT = 2
EXT_SET = 3
EXT_FROZENSET = 4
USER_CODES = range(64, 128)

#: How deep tuples, sets and registered types may nest in a value.  msgpack's
#: Python hook (:func:`_ext_hook`) recurses on the C stack, tens of KiB a
#: level, overflowing an 8 MiB stack (a crash) at about 190 levels: the
#: encoder refuses deeper values, both decoders deeper (crafted) payloads
#: with CorruptValue.  Half that depth leaves room for smaller stacks.
MAX_NESTING = 100

#: How deep lists and maps may nest in one msgpack payload (an extension's
#: payload is one of its own): msgpack packs and unpacks no deeper, and the
#: C decoder counts to it rather than trusting the recursion limit, which a
#: program may raise past what the C stack holds.
MAX_PAYLOAD_DEPTH = 1024

_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 64) - 1

# type -> (code, encode_fn);  code -> (type, decode_fn)
_user_encoders: dict[type, tuple[int, Callable[[Any], Any]]] = {}
_user_decoders: dict[int, tuple[type, Callable[[Any], Any]]] = {}
_registry_lock = threading.Lock()

_NATIVE = frozenset({type(None), bool, int, float, str, bytes, bytearray, memoryview,
                     list, tuple, dict, set, frozenset})


# ---------------------------------------------------------------- packing

class _PackState(threading.local):
    """Per-thread packers, one per nesting depth of extension payloads (a
    msgpack Packer is not re-entrant, and extension payloads are packed from
    inside the ``default`` callback)."""

    def __init__(self) -> None:
        self.packers: list[msgpack.Packer] = []
        self.depth = 0


_state = _PackState()


def _new_packer() -> msgpack.Packer:
    return msgpack.Packer(default=_default, use_bin_type=True, strict_types=True,
                          autoreset=True, use_single_float=False)


def _pack(obj: Any) -> bytes:
    """The msgpack payload of ``obj``: by the C packer when built, for the
    values it takes (made of the codec's own types; byte for byte what
    msgpack gives them), else by msgpack, which also gives the errors.
    O(size of ``obj``)."""
    payload = _pack_c(obj)
    return payload if payload is not None else _pack_msgpack(obj)


def _pack_c(obj: Any) -> bytes | None:
    """``obj``'s payload by the C packer, its extensions nested no deeper
    than what :data:`MAX_NESTING` leaves below the packing in progress;
    ``None`` without the C packer or for what it leaves to msgpack."""
    return _fast.pack(obj, MAX_NESTING - _state.depth) if _fast is not None else None


def _pack_msgpack(obj: Any) -> bytes:
    st = _state
    depth = st.depth
    if depth > MAX_NESTING:
        raise ValueError(f"cannot encode a value with tuples, sets or registered types nested more than "
                         f"{MAX_NESTING} deep (stores.codec.MAX_NESTING): it would not decode everywhere")
    if depth == len(st.packers):
        st.packers.append(_new_packer())
    packer = st.packers[depth]
    st.depth = depth + 1
    try:
        return packer.pack(obj)
    finally:
        st.depth = depth


def _default(obj: Any) -> msgpack.ExtType:
    t = type(obj)
    if t is tuple:
        return msgpack.ExtType(EXT_TUPLE, _pack(list(obj)))
    if t is int:  # outside the 64-bit range msgpack handles natively
        n = obj.bit_length() // 8 + 1
        return msgpack.ExtType(EXT_BIGINT, obj.to_bytes(n, "big", signed=True))
    if t is set:
        return msgpack.ExtType(EXT_SET, _pack(list(obj)))
    if t is frozenset:
        return msgpack.ExtType(EXT_FROZENSET, _pack(list(obj)))
    entry = _user_encoders.get(t)
    if entry is not None:
        code, encode_fn = entry
        return msgpack.ExtType(code, _pack(encode_fn(obj)))
    raise TypeError(
        f"cannot encode value of type {t.__module__}.{t.__qualname__}: the codec "
        f"handles None, bool, int, float, str, bytes, list, tuple, dict, set and "
        f"frozenset (exact types, not subclasses); register this type with "
        f"stores.codec.register_codec(type_, code, encode_fn, decode_fn)")


def encode(value: Any, *, bind: bytes | None = None) -> bytes:
    """Encode ``value`` to a self-checking blob; with ``bind``, one that
    decodes only with that same place (see the module docstring)."""
    payload = _pack(value)
    if bind is None:
        return _HEADER.pack(FORMAT_VERSION, zlib.crc32(payload)) + payload
    return _HEADER.pack(BOUND_FORMAT_VERSION, zlib.crc32(payload, zlib.crc32(bind))) + payload


# -------------------------------------------------------------- unpacking

class _UserDecodeError(Exception):
    """Carries an exception raised by a user decode_fn through msgpack."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(exc)
        self.exc = exc


def _unpack(data: bytes) -> Any:
    """One msgpack value with the codec's extensions: by the C decoder when
    built, else, and for what it does not take (malformed, lists deeper than
    its recursion), by msgpack, whose verdict is reported.  O(size): msgpack
    decodes the whole value at most once (a failure inside an extension
    fails the outermost C decode instead of a retry at every level)."""
    if _fast is not None and not _hook.msgpack_only:
        try:
            return _fast.unpack(data, _ext_hook, MAX_NESTING - _hook.depth, CorruptValue)
        except (_UserDecodeError, CorruptValue):  # the hook's verdict, or the C decoder's refusal
            raise
        except Exception:  # noqa: BLE001 - malformed or too deep for the C decoder: msgpack judges it below
            if _hook.depth:
                raise  # inside an extension: the outermost call decodes the whole value again
    return _unpack_msgpack(data)


def _unpack_msgpack(data: bytes) -> Any:
    """``data`` decoded by msgpack, the extensions inside it too; a
    timestamp is refused as the C decoder refuses it (:mod:`stores.codec_timestamps`)."""
    outer, _hook.msgpack_only = _hook.msgpack_only, True
    try:
        return codec_timestamps.unpackb(data, _ext_hook, CorruptValue)
    except msgpack.StackError:
        raise CorruptValue(f"a stored value nests lists and maps more than {MAX_PAYLOAD_DEPTH} deep") from None
    finally:
        _hook.msgpack_only = outer


class _HookDepth(threading.local):
    depth = 0  # the extensions (tuples, sets, registered types) around the one being decoded
    msgpack_only = False  # in the outermost call's msgpack decode: no C decoder below


_hook = _HookDepth()


def _ext_hook(code: int, data: bytes, levels: int = 0) -> Any:
    """msgpack's extension hook (``levels``: those the C decoder built around it)."""
    if code == EXT_BIGINT:
        if not data:
            raise CorruptValue("empty big-int extension")
        return int.from_bytes(data, "big", signed=True)
    depth = (outer := _hook.depth) + levels  # every other extension holds a value: one level deeper
    if depth >= MAX_NESTING:
        raise CorruptValue(f"a stored value nests tuples, sets or registered types more than {MAX_NESTING} deep")
    _hook.depth = depth + 1
    try:
        return _nested(code, data)
    finally:
        _hook.depth = outer


def _nested(code: int, data: bytes) -> Any:
    if code == EXT_TUPLE:
        return tuple(_unpack(data))
    if code == EXT_SET:
        return set(_unpack(data))
    if code == EXT_FROZENSET:
        return frozenset(_unpack(data))
    entry = _user_decoders.get(code)
    if entry is None:
        raise CorruptValue(
            f"unknown extension type code {code}: if the writer registered a type with "
            f"register_codec under this code, register it in this process too")
    inner = _unpack(data)
    try:
        return entry[1](inner)
    except Exception as exc:  # let the user's own error through unchanged
        raise _UserDecodeError(exc) from exc


def decode(blob: bytes | bytearray | memoryview, *, bind: bytes | None = None) -> Any:
    """Decode a blob made by :func:`encode` (with the same ``bind``).

    Raises :class:`FormatVersionError` for an unknown format version or a
    blob bound where none is expected or free where a bound one is, and
    :class:`CorruptValue` for a bad checksum (with ``bind``: also a value
    made for another place), a truncated blob or malformed content.  An
    exception raised by a registered ``decode_fn`` propagates unchanged.
    """
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise TypeError(f"decode() needs bytes, not {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < HEADER_SIZE + 1:
        raise CorruptValue(f"blob of {len(blob)} bytes is too short to hold a value "
                           f"(header is {HEADER_SIZE} bytes)")
    version, crc = _HEADER.unpack_from(blob)
    want = FORMAT_VERSION if bind is None else BOUND_FORMAT_VERSION
    if version != want:
        if version == FORMAT_VERSION:
            raise FormatVersionError(
                "blob has format version 1, not bound to its place: it was written by a "
                "version of this code that did not bind stored values to their window "
                "and position, and cannot be read as one")
        if version == BOUND_FORMAT_VERSION:
            raise FormatVersionError("blob has format version 2: it is bound to a place, "
                                     "and decodes only with that place")
        raise FormatVersionError(
            f"blob has format version {version}; this code reads versions "
            f"{FORMAT_VERSION} and {BOUND_FORMAT_VERSION} only (written by a newer or foreign version?)")
    payload = blob[HEADER_SIZE:]
    computed = zlib.crc32(payload) if bind is None else zlib.crc32(payload, zlib.crc32(bind))
    if computed != crc:
        raise CorruptValue(f"checksum mismatch in a blob of {len(blob)} bytes (stored {crc:#010x}, "
                           f"computed {computed:#010x})" + ("" if bind is None else
                           ": corrupt, or a value copied from another window or position"))
    try:
        return _unpack(payload)
    except _UserDecodeError as err:
        raise err.exc from None
    except CorruptValue:
        raise
    except Exception as exc:  # msgpack errors, unhashable keys, bad UTF-8, ...
        raise CorruptValue(f"malformed payload in a blob of {len(blob)} bytes: "
                           f"{type(exc).__name__}: {exc}") from exc


# ----------------------------------------------------------- registration

def register_codec(type_: type, code: int, encode_fn: Callable[[Any], Any],
                   decode_fn: Callable[[Any], Any]) -> None:
    """Teach the codec a user type.

    ``encode_fn(obj)`` returns any encodable value (it is encoded
    recursively); ``decode_fn(value)`` rebuilds the object from it.  ``code``
    must be in 64..127 (0..63 are reserved).  Matching is on the exact type:
    register subclasses separately.  Every process that decodes must register
    the same types under the same codes.

    Raises :class:`~stores.errors.CodecRegistrationError` (a ``ValueError``)
    if the code is out of range or already used, if the type is already
    registered, or if it is a type the codec handles natively.
    """
    if not isinstance(type_, type):
        raise CodecRegistrationError(f"register_codec needs a type, not {type_!r}")
    if isinstance(code, bool) or not isinstance(code, int) or code not in USER_CODES:
        raise CodecRegistrationError(
            f"extension code {code!r} for {type_.__qualname__} is out of range: user codes "
            f"are {USER_CODES.start}..{USER_CODES.stop - 1} (0..63 are reserved)")
    if type_ in _NATIVE:
        raise CodecRegistrationError(
            f"{type_.__qualname__} is encoded natively and cannot be registered")
    if not callable(encode_fn) or not callable(decode_fn):
        raise CodecRegistrationError("encode_fn and decode_fn must be callable")
    with _registry_lock:
        if type_ in _user_encoders:
            raise CodecRegistrationError(
                f"{type_.__qualname__} is already registered with code "
                f"{_user_encoders[type_][0]}; call unregister_codec first")
        if code in _user_decoders:
            raise CodecRegistrationError(
                f"extension code {code} is already used by "
                f"{_user_decoders[code][0].__qualname__}")
        _user_encoders[type_] = (code, encode_fn)
        _user_decoders[code] = (type_, decode_fn)


def unregister_codec(type_: type) -> None:
    """Forget a type registered with :func:`register_codec` (no error if it
    was not registered)."""
    with _registry_lock:
        entry = _user_encoders.pop(type_, None)
        if entry is not None:
            _user_decoders.pop(entry[0], None)


def registered_codecs() -> dict[type, int]:
    """The user types currently registered, with their codes."""
    with _registry_lock:
        return {t: c for t, (c, _) in _user_encoders.items()}


__all__ = ["encode", "decode", "register_codec", "unregister_codec", "registered_codecs",
           "FORMAT_VERSION", "BOUND_FORMAT_VERSION", "HEADER_SIZE"]


# ------------------------------------------------ values packed separately

def packed(value: Any) -> bytes:
    """The msgpack payload :func:`encode` gives ``value`` (no header), to be
    put together by :func:`encode_map` and :func:`packed_list`."""
    return _pack(value)


def packed_in_c(value: Any) -> bytes | None:
    """:func:`packed` by the C packer alone; ``None`` when packing is not in
    C (:data:`PACKS_IN_C`) or ``value`` holds what it leaves to msgpack (a
    registered type, a big int, ...)."""
    return _pack_c(value) if PACKS_IN_C else None


def check_encodable(value: Any) -> None:
    """Raise ``TypeError`` naming the type when :func:`encode` cannot encode
    ``value``: a store-backed window checks each lifted value before it
    enters (``Store.check_value``), since one that cannot be written would
    fail a later flush, with the window unusable.  O(size of ``value``)."""
    if packed_in_c(value) is None:
        _pack(value)


def untrack(value: Any) -> bool:
    """Untrack from the cyclic garbage collector ``value``'s lists, dicts,
    tuples and sets whose items all are untracked, bottom-up; whether
    ``value`` now is.  Only for values never changed again (a list or set
    is never tracked again): :mod:`stores.meta_cache`'s records.  In C,
    else ``False``.  O(size of ``value``)."""
    return _fast.untrack(value) if _fast is not None else False


def packed_list(parts: list[bytes]) -> bytes:
    """The payload of a list whose items' payloads are ``parts``."""
    n = len(parts)
    head = bytes([0x90 | n]) if n < 16 else b"\xdc" + n.to_bytes(2, "big") if n < 1 << 16 \
        else b"\xdd" + n.to_bytes(4, "big")
    return head + b"".join(parts)


def packed_map(items: list[tuple[Any, bytes]]) -> bytes:
    """The payload of a dict given as ``(key, payload of its value)`` pairs."""
    n = len(items)
    head = bytes([0x80 | n]) if n < 16 else b"\xde" + n.to_bytes(2, "big") if n < 1 << 16 \
        else b"\xdf" + n.to_bytes(4, "big")
    return head + b"".join(_pack(k) + v for k, v in items)


def encode_map(items: list[tuple[Any, bytes]]) -> bytes:
    """``encode(dict)`` of a dict given as ``(key, payload of its value)``
    pairs, byte for byte: a caller that keeps the payloads of values that
    did not change re-encodes only the others."""
    payload = packed_map(items)
    return _HEADER.pack(FORMAT_VERSION, zlib.crc32(payload)) + payload
