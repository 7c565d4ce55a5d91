"""st.py - safetensors on the standard library for the peer runners and their tests:
write named raw tensors, read them back as flat Python arrays, and the golden
criterion of tests/golden/README.md on those arrays (no torch or numpy needed, so
the tests that compare a peer's outputs with ftengine's run on a bare python3).

Layout: 8-byte little-endian u64 N, N bytes of JSON (name -> dtype, shape,
data_offsets relative to the end of the header), then the raw little-endian data.
"""
import array
import json
import math
import struct
import sys

# safetensors dtype -> (array typecode, bytes per element)
TYPECODES = {"F32": ("f", 4), "F64": ("d", 8), "I64": ("q", 8), "I32": ("i", 4), "U8": ("B", 1), "I8": ("b", 1)}
ATOL, RTOL, REL_L2 = 1e-4, 1e-4, 1e-5  # tests/golden/README.md


def write(path, tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw little-endian bytes)], written in that order."""
    hdr, off, blobs = {}, 0, []
    for name, dtype, shape, raw in tensors:
        n = math.prod(shape) * TYPECODES[dtype][1]
        if len(raw) != n:
            raise ValueError(f"{name}: {len(raw)} bytes for {dtype} {list(shape)}")
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
        blobs.append(raw)
    if metadata:
        hdr["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw_hdr = json.dumps(hdr).encode()
    raw_hdr += b" " * (-len(raw_hdr) % 8)  # 8-byte aligned data, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw_hdr)) + raw_hdr)
        for b in blobs:
            f.write(b)


def read(path):
    """name -> (dtype, shape, flat array); ValueError naming the file on a malformed one."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds the file: truncated?")
    try:
        hdr = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: header is not JSON ({e})") from None
    hdr.pop("__metadata__", None)
    body = memoryview(data)[8 + n:]
    out = {}
    for name, e in hdr.items():
        if e.get("dtype") not in TYPECODES:
            raise ValueError(f"{path}: {name}: dtype {e.get('dtype')!r} not readable here")
        code, size = TYPECODES[e["dtype"]]
        b, end = e["data_offsets"]
        if not (0 <= b <= end <= len(body)) or end - b != math.prod(e["shape"]) * size:
            raise ValueError(f"{path}: {name}: data_offsets {e['data_offsets']} do not fit {e['shape']}")
        a = array.array(code)
        a.frombytes(bytes(body[b:end]))
        if sys.byteorder != "little":
            a.byteswap()
        out[name] = (e["dtype"], tuple(e["shape"]), a)
    return out


def compare(name, got, exp):
    """(ok, line): the golden criterion for one output; got and exp are (dtype, shape, array)."""
    if got[1] != exp[1]:
        return False, f"{name}: shape {got[1]}, expected {exp[1]}"
    g, e = got[2], exp[2]
    if not all(math.isfinite(x) for x in g):
        return False, f"{name}: NaN or Inf in the output"
    over, dmax, d2, e2 = 0, 0.0, 0.0, 0.0
    for x, y in zip(g, e):
        d = abs(x - y)
        dmax = max(dmax, d)
        over += d > ATOL + RTOL * abs(y)
        d2 += d * d
        e2 += y * y
    rel = math.sqrt(d2) / max(math.sqrt(e2), 1e-30)
    ok = over == 0 and rel <= REL_L2
    return ok, (f"{name}: {'ok' if ok else 'FAIL'} max abs err {dmax:.2e}, rel L2 {rel:.2e}"
                f"{f', {over} elements over tolerance' if over else ''}")
