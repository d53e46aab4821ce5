"""Read a PNG's pixels with the standard library (zlib and struct): enough to tell a
screenshot from a blank one. 8-bit RGB or RGBA, not interlaced: what Chromium writes."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def rows(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, each row's unfiltered bytes)."""
    data = path.read_bytes()
    assert data[:8] == SIGNATURE, f"{path}: not a PNG"
    position, idat = 8, []
    width = height = channels = 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    previous = bytearray(stride)
    out = []
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                up_left = previous[i - channels] if i >= channels else 0
                line[i] = (line[i] + _paeth(left, previous[i], up_left)) & 0xFF
        else:
            assert kind == 0, f"unknown PNG filter {kind}"
        out.append(bytes(line))
        previous = line
    return width, height, out


def colours(path: Path) -> tuple[int, tuple[int, int, int]]:
    """How many distinct RGB colours the image has, and its top-left pixel's colour."""
    width, _, lines = rows(path)
    channels = len(lines[0]) // width
    seen: set[bytes] = set()
    for line in lines:
        seen.update(line[i : i + 3] for i in range(0, len(line), channels))
    first = lines[0]
    return len(seen), (first[0], first[1], first[2])
