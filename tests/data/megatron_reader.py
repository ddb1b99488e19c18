"""An independent reader of Megatron-LM MMIDIDX datasets, written from the format
description (docs/datasets.md) the way Megatron's MMapIndexedDataset reads it:
numpy memmaps over data.idx and data.bin. Prints a JSON summary.

usage: megatron_reader.py DATASET_DIR [FIRST_N]
"""
import json
import struct
import sys

import numpy as np

DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}


def read(prefix, first_n):
    with open(prefix + ".idx", "rb") as f:
        magic = f.read(9)
        assert magic == b"MMIDIDX\x00\x00", "bad magic %r" % magic
        (version,) = struct.unpack("<Q", f.read(8))
        assert version == 1, version
        (code,) = struct.unpack("<B", f.read(1))
        dtype = DTYPES[code]
        (seq_count,) = struct.unpack("<Q", f.read(8))
        (doc_count,) = struct.unpack("<Q", f.read(8))
        offset = f.tell()
    buf = np.memmap(prefix + ".idx", mode="r", order="C")
    sizes = np.frombuffer(buf, dtype=np.int32, count=seq_count, offset=offset)
    pointers = np.frombuffer(buf, dtype=np.int64, count=seq_count, offset=offset + sizes.nbytes)
    doc_idx = np.frombuffer(buf, dtype=np.int64, count=doc_count, offset=offset + sizes.nbytes + pointers.nbytes)
    assert offset + sizes.nbytes + pointers.nbytes + doc_idx.nbytes == len(buf), "trailing bytes in .idx"
    bin_buf = np.memmap(prefix + ".bin", mode="r", order="C")
    itemsize = np.dtype(dtype).itemsize
    # Megatron: get(idx) = np.frombuffer(bin, dtype, count=sizes[idx], offset=pointers[idx])
    seqs = [np.frombuffer(bin_buf, dtype=dtype, count=int(sizes[i]), offset=int(pointers[i])) for i in range(seq_count)]
    expected_ptr = np.concatenate([[0], np.cumsum(sizes.astype(np.int64) * itemsize)[:-1]]) if seq_count else []
    all_tokens = np.concatenate(seqs) if seqs else np.zeros(0, dtype=dtype)
    return {
        "dtype": np.dtype(dtype).name,
        "sequence_count": int(seq_count),
        "document_count": int(doc_count),
        "sizes": sorted(set(int(s) for s in sizes)),
        "pointers_contiguous": bool(np.array_equal(pointers, expected_ptr)),
        "doc_idx_is_range": bool(np.array_equal(doc_idx, np.arange(doc_count))),
        "bin_bytes_match": int(len(bin_buf)) == int(sizes.astype(np.int64).sum()) * itemsize,
        "first_tokens": [int(t) for t in all_tokens[:first_n]],
        "max_token": int(all_tokens.max()) if len(all_tokens) else -1,
        "bos_count": int((all_tokens == 1).sum()),
    }


if __name__ == "__main__":
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    print(json.dumps(read(d + "/data", n)))
