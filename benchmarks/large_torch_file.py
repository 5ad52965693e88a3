"""Check pyflatmodule on a real torch-written PTMF file over 2 GiB.

    python benchmarks/large_torch_file.py [--gib 2.6] [--keep DIR]

Torch 2.13 writes the model (in a child process) together with a checksum of every
tensor taken from its in-memory weights, then is asked to load the file back (it
refuses files over 2 GiB). pyflatmodule loads it and every tensor's checksum must
match. Needs torch==2.13.0, about 3x the model size in RAM for torch's writer, and
the model size on disk.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

WRITER = r"""
import hashlib, json, sys, torch
from torch import nn
path, layers, width = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
m = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)]).eval()
sums = {k: hashlib.blake2b(v.detach().contiguous().numpy().tobytes(), digest_size=16).hexdigest()
        for k, v in m.state_dict().items()}
torch.jit.save_jit_module_to_flatbuffer(torch.jit.script(m), path)
json.dump(sums, sys.stdout)
"""

READER = r"""
import sys, torch
try:
    torch.jit.jit_module_from_flatbuffer(sys.argv[1])
    print("loaded")
except Exception as e:
    print(type(e).__name__ + ": " + str(e).strip().splitlines()[0])
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.6, help="model size in GiB")
    ap.add_argument("--keep", help="directory to write (and keep) the model in")
    args = ap.parse_args()
    import numpy as np

    import pyflatmodule as pfm

    width = 8192
    layers = max(1, round(args.gib * 2**30 / (4 * width * (width + 1))))
    folder = args.keep or tempfile.mkdtemp(prefix="pfm-large-")
    path = os.path.join(folder, f"linear_{layers}x{width}.ff")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WRITER, path, str(layers), str(width)],
                         check=True, capture_output=True, text=True)
    expected = json.loads(out.stdout)
    size = os.path.getsize(path)
    print(f"torch wrote {path}: {size / 2**30:.2f} GiB, {len(expected)} tensors "
          f"in {time.perf_counter() - t0:.0f} s")
    torch_says = subprocess.run([sys.executable, "-c", READER, path], capture_output=True,
                                text=True).stdout.strip()
    print(f"torch.jit.jit_module_from_flatbuffer: {torch_says or 'crashed'}")
    t0 = time.perf_counter()
    m = pfm.load(path)
    opened = time.perf_counter() - t0
    report = pfm.verify(path)
    sd = m.state_dict()
    mismatches = [k for k, v in sd.items()
                  if hashlib.blake2b(np.ascontiguousarray(v).tobytes(), digest_size=16)
                  .hexdigest() != expected.get(k)]
    print(f"pyflatmodule: opened in {opened * 1e3:.2f} ms, {report.wrapped_vtables} wrapped "
          f"vtable offsets, {len(sd)} tensors, {len(sd) - len(mismatches)} checksums match")
    if not args.keep:
        os.unlink(path)
        os.rmdir(folder)
    ok = not mismatches and set(sd) == set(expected) and size > 2**31
    print("OK" if ok else f"FAILED: {mismatches or 'key sets differ'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
