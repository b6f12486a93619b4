"""The ``.ms`` offline model file: one self-contained, checksummed, memory-mappable file.

Layout (all integers little-endian)::

    0   magic  b"CLMS"
    4   uint32 format version (FORMAT_VERSION)
    8   uint64 header length in bytes
    16  uint32 CRC32 of the header (as stored)
    20  uint32 reserved (0)
    24  uint64 total file size in bytes (truncation check)
    32  header: UTF-8 JSON {"metadata": {...}, "graph": <graph_codec encoding>,
                            "sections": [{"name", "offset", "size", "crc32"}, ...]},
        zlib-compressed from version 3 (the graph's JSON compresses ~12x: bert_tiny's 70 KB header is 6 KB)
    ... zero padding to a multiple of 64 = the data area start
    data area: the sections, each starting 64-byte aligned; offsets in the table are relative to the
               data area.  Section "weights" holds every constant and array attribute (graph_codec.py);
               the others are named blobs stored for other parts of the converter (e.g. "native/..." for
               the shared object, LLVM IR and target fingerprint).

Loading maps the file read-only and views constants in place (no copy), after checking the magic, the version,
the size, the header CRC and every section's CRC.  Nothing in the file is executed or unpickled.  Saving writes
a temporary file in the target directory and renames it over the target, so a failed save leaves nothing.
"""
from __future__ import annotations

import json
import mmap as _mmap
import os
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import RET_ERROR, RET_GRAPH_FILE_ERR, ConverterError
from ..fileio import atomic_file
from ..ir.core import Graph
from .graph_codec import (
    ALIGN,
    CodecError,
    WeightsWriter,
    align_up,
    decode_graph,
    encode_graph,
)

MAGIC = b"CLMS"
# 2: the graph records which native drivers each node may run on (``native_drivers``) and the native code links
# only those; a version-1 file linked every driver and left the choice to the runtime, which no longer makes it
# 3: the header is zlib-compressed (version-2 files, with a plain JSON header, are still read)
FORMAT_VERSION = 3
SUPPORTED_VERSIONS = (2, FORMAT_VERSION)
WEIGHTS_SECTION = "weights"
SOURCE_SECTION = "source/model.onnx"     # the ONNX source of a model with dynamic dims (runtime/respecialize.py)
_PREFIX = struct.Struct("<4sIQIIQ")
_PAD = bytes(ALIGN)


@dataclass
class LoadedModel:
    """What ``load_model`` returns: the graph (constants view the file), the metadata and the extra sections."""
    graph: Graph
    metadata: dict[str, Any]
    sections: dict[str, memoryview] = field(default_factory=dict)
    path: str = ""
    format_version: int = FORMAT_VERSION


def save_model(path: str | os.PathLike, graph: Graph, metadata: Mapping[str, Any] | None = None,
               sections: Mapping[str, bytes | bytearray | memoryview] | None = None,
               quantized: dict | None = None) -> str:
    """Writes ``graph`` + ``metadata`` (JSON-able) + named byte ``sections`` to ``path`` atomically.

    ``quantized``: {id(constant array): QuantizedWeight} of weights to store quantized (model/quantized.py).
    Returns the path written.  Raises ConverterError if the graph holds something that cannot be stored
    or the file cannot be written; in either case no file is left behind.
    """
    path = os.fspath(path)
    meta = dict(metadata or {})
    meta.setdefault("converter_version", _converter_version())
    try:
        weights = WeightsWriter(quantized)
        graph_obj = encode_graph(graph, weights)
        blobs = _collect_sections(weights, sections or {})
        header = {"metadata": meta, "graph": graph_obj,
                  "sections": [{"name": n, "offset": off, "size": size, "crc32": crc}
                               for n, off, size, crc, _ in blobs]}
        header_bytes = zlib.compress(json.dumps(header, separators=(",", ":")).encode("utf-8"), 6)
    except (CodecError, TypeError, ValueError) as e:
        raise ConverterError(RET_ERROR, f"cannot save model file {path}: {e}") from None
    data_start = align_up(_PREFIX.size + len(header_bytes))
    data_end = max((off + size for _, off, size, _, _ in blobs), default=0)
    file_size = data_start + data_end
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes), zlib.crc32(header_bytes), 0, file_size)
    _atomic_write(path, prefix, header_bytes, data_start, blobs, file_size)
    return path


def _converter_version() -> str:
    from ..version import __version__
    return __version__


def _collect_sections(weights: WeightsWriter, extra: Mapping[str, Any]) -> list[tuple]:
    """[(name, offset, size, crc, chunks)] with 64-aligned offsets; chunks = [(offset in section, buffer)]."""
    out = []
    crc, pos = 0, 0
    for off, arr in weights.chunks:
        crc = zlib.crc32(_PAD[: off - pos], crc)
        buf = memoryview(arr).cast("B")
        crc = zlib.crc32(buf, crc)
        pos = off + len(buf)
    out.append((WEIGHTS_SECTION, 0, weights.size, crc, [(o, memoryview(a).cast("B")) for o, a in weights.chunks]))
    end = align_up(weights.size)
    for name, data in extra.items():
        if not isinstance(name, str) or not name or name == WEIGHTS_SECTION:
            raise CodecError(f"invalid section name {name!r}")
        buf = memoryview(data).cast("B")
        out.append((name, end, len(buf), zlib.crc32(buf), [(0, buf)]))
        end = align_up(end + len(buf))
    return out


def _atomic_write(path: str, prefix: bytes, header: bytes, data_start: int, blobs: list[tuple],
                  file_size: int) -> None:
    try:
        with atomic_file(path) as f:
            f.write(prefix)
            f.write(header)
            pos = len(prefix) + len(header)
            for _, sec_off, _, _, chunks in blobs:
                for off, buf in chunks:
                    target = data_start + sec_off + off
                    f.write(bytes(target - pos))
                    f.write(buf)
                    pos = target + len(buf)
            f.write(bytes(file_size - pos))
    except OSError as e:
        raise ConverterError(RET_ERROR, f"cannot write model file {path}: {e.strerror or e}") from None


def load_model(path: str | os.PathLike, mmap: bool = True) -> LoadedModel:
    """Reads a ``.ms`` file written by ``save_model``.

    With ``mmap=True`` the file is mapped read-only and constants are read-only views into the mapping;
    otherwise the file is read into memory once.  Raises ConverterError(-200) naming the file when it is not
    a converter_lite model, has another format version, is truncated or corrupted, or its header is invalid.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            _check_prefix(path, f.read(_PREFIX.size), size)
            if mmap:
                # MAP_POPULATE maps every page at once: the checksum then packing read the whole file, and page
                # by page faults cost swin_tiny (106 MB) 237 ms of load where it now takes ~100
                buf = _mmap.mmap(f.fileno(), 0, flags=_mmap.MAP_SHARED | getattr(_mmap, "MAP_POPULATE", 0),
                                 prot=_mmap.PROT_READ)
            else:
                f.seek(0)
                buf = f.read()
    except OSError as e:
        raise ConverterError(RET_GRAPH_FILE_ERR, f"cannot read model file {path}: {e.strerror or e}") from None
    return _parse(path, memoryview(buf))


def _fail(path: str, what: str) -> ConverterError:
    return ConverterError(RET_GRAPH_FILE_ERR, f"model file {path} {what}")


def _check_prefix(path: str, prefix: bytes, size: int) -> None:
    if size == 0:
        raise _fail(path, "is empty (0 bytes); it is not a converter_lite .ms model")
    head = prefix[:4]
    if head != MAGIC[: len(head)]:
        raise _fail(path, f"is not a converter_lite .ms model (magic {head!r}, expected {MAGIC!r})")
    if len(prefix) < _PREFIX.size:
        raise _fail(path, f"is truncated ({size} bytes, the fixed header alone has {_PREFIX.size})")
    _, version, header_len, _, _, file_size = _PREFIX.unpack(prefix)
    if version not in SUPPORTED_VERSIONS:
        readable = ", ".join(map(str, SUPPORTED_VERSIONS))
        older = " (converted by an older converter_lite)" if version < FORMAT_VERSION else ""
        raise _fail(path, f"has format version {version}{older}; this converter_lite reads version {readable}: "
                          "reconvert the model from its ONNX source with this converter_lite")
    if size < file_size:
        raise _fail(path, f"is truncated ({size} of {file_size} bytes)")
    if size > file_size:
        raise _fail(path, f"is corrupted ({size - file_size} unexpected bytes after the recorded end "
                          f"at {file_size})")
    if _PREFIX.size + header_len > size:
        raise _fail(path, f"is corrupted (header length {header_len} exceeds the file)")


def _parse(path: str, buf: memoryview) -> LoadedModel:
    _, version, header_len, header_crc, _, _ = _PREFIX.unpack(buf[: _PREFIX.size])
    header_bytes = buf[_PREFIX.size: _PREFIX.size + header_len]
    if zlib.crc32(header_bytes) != header_crc:
        raise _fail(path, "is corrupted (header checksum mismatch)")
    try:
        text = bytes(header_bytes) if version < 3 else zlib.decompress(header_bytes)
        header = json.loads(text.decode("utf-8"))
        table = {s["name"]: (int(s["offset"]), int(s["size"]), int(s["crc32"])) for s in header["sections"]}
        metadata = header["metadata"]
        graph_obj = header["graph"]
    except (ValueError, KeyError, TypeError, zlib.error) as e:
        raise _fail(path, f"has an invalid header ({type(e).__name__}: {e})") from None
    data_start = align_up(_PREFIX.size + header_len)
    views: dict[str, memoryview] = {}
    for name, (offset, size, crc) in table.items():
        start = data_start + offset
        if offset < 0 or size < 0 or start + size > len(buf):
            raise _fail(path, f"has an invalid header (section {name!r} lies outside the file)")
        view = buf[start: start + size]
        if zlib.crc32(view) != crc:
            raise _fail(path, f"is corrupted (checksum mismatch in section {name!r})")
        views[name] = view
    weights = views.pop(WEIGHTS_SECTION, memoryview(b""))
    try:
        graph = decode_graph(graph_obj, weights, len(weights))
    except CodecError as e:
        raise _fail(path, f"has an invalid header ({e})") from None
    if not isinstance(metadata, dict):
        raise _fail(path, "has an invalid header (metadata is not an object)")
    return LoadedModel(graph, metadata, views, path, version)
