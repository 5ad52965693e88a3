#!/usr/bin/env python3
"""ExecuTorch's own selective-build files for the programs in tests/data, the oracle of
``pyflatmodule ops --yaml``:

    python tests/data/make_oplist_oracle.py     # needs executorch 1.5.1 (and its torch)

For each program (tests/data/et/*.pte, *.bpte and tests/data/wild/*.pte), ExecuTorch's
``gen_oplist --model_file_path`` runs in a child process of its own (it reads the file
with unchecked flatbuffer accessors; a file it cannot read is recorded as such) and its
``selected_operators.yaml`` is kept, parsed, under the file's path relative to
tests/data. Then ``gen_all_oplist`` merges the files of MERGED, as a build of several
models does (its ``debug_info`` names the YAML files it merged: here named back by their
programs). All of it goes to ``oplist.oracle.json``; ``debug_info`` holds the paths as
they were given (relative to tests/data, the directory the tools ran in).
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
#: programs merged by gen_all_oplist: two methods, XNNPACK delegates and portable kernels
MERGED = ["et/mlp.pte", "et/two_methods.pte", "et/xnn_conv.pte", "et/dynamic.pte"]

_GEN = """
import sys
from executorch.codegen.tools.gen_oplist import gen_oplist
gen_oplist(output_path=sys.argv[2], model_file_path=sys.argv[1])
"""


def gen_oplist(path: str, out: str) -> str:
    """gen_oplist on ``path`` (relative to tests/data) into ``out``; '' or why it failed."""
    r = subprocess.run([sys.executable, "-c", _GEN, path, out], cwd=HERE,
                       capture_output=True, text=True, timeout=600)
    if r.returncode:
        return (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
    return ""


def main() -> None:
    programs = sorted(os.path.relpath(p, HERE) for pattern in ("et/*.pte", "et/*.bpte",
                                                               "wild/*.pte")
                      for p in glob.glob(os.path.join(HERE, pattern)))
    files = {}
    with tempfile.TemporaryDirectory() as tmp:
        outputs = {}
        for path in programs:
            out = os.path.join(tmp, path.replace("/", "__") + ".yaml")
            error = gen_oplist(path, out)
            if error:
                files[path] = {"error": error}
                continue
            with open(out, encoding="utf-8") as f:
                files[path] = yaml.safe_load(f)
            outputs[path] = out
        listing = os.path.join(tmp, "models.txt")
        with open(listing, "w", encoding="utf-8") as f:
            f.write("\n".join(outputs[p] for p in MERGED))
        merged_dir = os.path.join(tmp, "merged")
        os.mkdir(merged_dir)
        subprocess.run([sys.executable, "-m", "executorch.codegen.tools.gen_all_oplist",
                        "--output_dir", merged_dir, "--model_file_list_path", "@" + listing],
                       cwd=HERE, check=True, capture_output=True, timeout=600)
        with open(os.path.join(merged_dir, "selected_operators.yaml"), encoding="utf-8") as f:
            merged = yaml.safe_load(f)
        # gen_all_oplist names each operator's sources by the YAML files it merged (here
        # temporary ones): named back by their programs, in sorted order (it keeps a set)
        program_of = {out: path for path, out in outputs.items()}
        for op in merged["operators"].values():
            op["debug_info"] = sorted(program_of[p] for p in op["debug_info"])
    doc = {"files": files, "merged": {"programs": MERGED, "yaml": merged}}
    with open(os.path.join(HERE, "oplist.oracle.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    failed = [p for p, d in files.items() if "error" in d]
    print(f"{len(files) - len(failed)} programs, {len(failed)} gen_oplist cannot read: "
          f"{failed}")


if __name__ == "__main__":
    main()
