#!/usr/bin/env python3
"""Regenerate tests/data/hf/hf_8da4w.*: a program as optimum-executorch exports it with
4-bit weights in groups (needs optimum-executorch 1.1.0: executorch 1.5.1, torch 2.14.1,
transformers 5.0.0rc1, torchao 0.18; nothing is downloaded).

    python tests/data/make_hf_data.py

benchmarks/zoo_hf_build.py makes the export ``minillama_8da4w``: a one-layer Llama
(hidden size 64, random weights) through ``main_export(..., task="text-generation",
recipe="xnnpack", qlinear="8da4w", qembedding="8w")``, as ``optimum-cli export executorch
--qlinear 8da4w --qembedding 8w`` does. It writes, in tests/data/hf/:

- ``hf_8da4w.pte``, the program;
- ``hf_8da4w.torchao.npz``: torchao's own view of each 4-bit linear weight of the module
  optimum exported (``<fqn>.qdata``, ``.scale``, ``.zero_point`` and ``.dequantized``:
  torchao's ``dequantize_affine`` over the scales rounded to bfloat16 as XNNPACK stores
  them; see zoo_hf_build.py), and of its 8-bit embedding weight (float32 scales);
- ``hf_8da4w.oracle.json``: the zoo's manifest entry: how it was made, each weight's
  ``block_size``, ExecuTorch's reader (``deserialize_pte_binary``, with the
  ``embedding_byte`` call's values) and runtime on the program, and the versions that
  made it.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILDER = os.path.join(ROOT, "benchmarks", "zoo_hf_build.py")
OUT = os.path.join(HERE, "hf")
STEM = "hf_8da4w"


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(
            p for p in (os.path.dirname(BUILDER), os.environ.get("PYTHONPATH")) if p))
        subprocess.run([sys.executable, BUILDER, tmp, "minillama_8da4w"], check=True, env=env)
        with open(os.path.join(tmp, "zoo_hf.json"), encoding="utf-8") as f:
            manifest = json.load(f)
        (entry,) = manifest["files"]
        if "error" in entry or "error" in entry["reader"] or "error" in entry["runtime"]:
            print(json.dumps(entry, indent=1), file=sys.stderr)
            return 1
        shutil.copyfile(os.path.join(tmp, entry["file"]), os.path.join(OUT, STEM + ".pte"))
        shutil.copyfile(os.path.join(tmp, entry["name"] + ".torchao.npz"),
                        os.path.join(OUT, STEM + ".torchao.npz"))
        entry.update(file=STEM + ".pte", versions=manifest["versions"])
        with open(os.path.join(OUT, STEM + ".oracle.json"), "w", encoding="utf-8") as f:
            json.dump(entry, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
