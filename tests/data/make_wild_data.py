#!/usr/bin/env python3
"""ExecuTorch's answers for the files in tests/data/wild/: programs others wrote.

    python tests/data/make_wild_data.py            # needs executorch 1.5.1 and torch 2.13
    python tests/data/make_wild_data.py --only a.pte,b.pte    # just those

The files themselves are copied from public repositories, as their owners committed them
(wild/SOURCES.json names each one's repository, path, commit and license); nothing here
writes them. For every program NAME.pte (and the program inside NAME.bpte) this writes
``NAME.oracle.json`` + ``NAME.oracle.npz``, each part from a child process (the runtime
may crash on a file it was not built for):

- ``header``, ``program``, ``restored``: ExecuTorch's extended-header reader, its
  flatbuffer reader and ``deserialize_pte_binary`` (as make_et_data.py writes them; the
  constant buffers' bytes in the npz);
- ``runtime``: per verification level (``Minimal``, ``InternalConsistency``) the
  runtime's ``load_program`` (``"ok"`` or its error; given the data file SOURCES.json
  names for the program, if any), its method names, and per method
  ``load_method``'s answer (``"ok"`` or the error, e.g. a kernel or backend this build
  lacks) and the method's input and output metadata (``null`` for one that is not a
  tensor); ``{"error": ...}`` if the runtime's child failed.

For an ETDump NAME.etdp, ``NAME.oracle.json`` holds ``etdump``: ExecuTorch's reading of it
(``deserialize_from_etdump_flatcc``, as make_etdump.py records it).
"""
import json
import os
import sys
import tempfile
from typing import Any, Dict, List, Optional

from make_et_data import run_child

HERE = os.path.dirname(os.path.abspath(__file__))
WILD = os.path.join(HERE, "wild")
LEVELS = ("Minimal", "InternalConsistency")


def _program_bytes(path: str) -> bytes:
    """A program's bytes: the file, or the program a bundled program embeds."""
    with open(path, "rb") as f:
        data = f.read()
    if not path.endswith(".bpte"):
        return data
    from executorch.devtools.bundled_program.serialize import (
        deserialize_from_flatbuffer_to_bundled_program,
    )
    return bytes(deserialize_from_flatbuffer_to_bundled_program(data).program)


def _exir(path: str, result: str) -> None:
    import numpy as np
    from make_et_data import _Arrays, _oracle_pte
    arrays = _Arrays()
    with tempfile.NamedTemporaryFile(suffix=".pte") as f:
        f.write(_program_bytes(path))
        f.flush()
        res = _oracle_pte(f.name, arrays)
    with open(result + ".json", "w", encoding="utf-8") as out:
        json.dump(res, out)
    np.savez(result + ".npz", **arrays.arrays)


def _data_files(path: str) -> List[str]:
    """The data files (.ptd) SOURCES.json gives for the program at ``path``."""
    with open(os.path.join(WILD, "SOURCES.json"), encoding="utf-8") as f:
        entry = {s["file"]: s for s in json.load(f)["files"]}[os.path.basename(path)]
    return [os.path.join(WILD, d) for d in entry.get("data", [])]


def _runtime(path: str, result: str) -> None:
    from executorch.runtime import Runtime, Verification
    data_files = _data_files(path)
    # the runtime takes a data file beside a program given by its path only
    data: Any = path if data_files else _program_bytes(path)
    more = {"data_path": data_files[0]} if data_files else {}
    out: Dict[str, Any] = {}
    for level in LEVELS:
        entry: Dict[str, Any] = {}
        try:
            program = Runtime.get().load_program(data, verification=getattr(Verification, level),
                                                 **more)
        except Exception as e:  # noqa: BLE001 - the runtime's refusal is the answer
            out[level] = {"load_program": f"{type(e).__name__}: {e}"}
            continue
        entry["load_program"] = "ok"
        entry["method_names"] = sorted(program.method_names)
        entry["methods"] = {}
        for name in entry["method_names"]:
            meta = program.metadata(name)

            def infos(get: Any, n: int) -> List[Optional[Dict[str, Any]]]:
                out: List[Optional[Dict[str, Any]]] = []
                for i in range(n):
                    try:
                        t = get(i)
                    except (IndexError, RuntimeError):    # not a tensor (an int, ...)
                        out.append(None)
                        continue
                    out.append({"dtype": int(t.dtype()), "sizes": list(t.sizes()),
                                "nbytes": t.nbytes()})
                return out
            method: Dict[str, Any] = {
                "inputs": infos(meta.input_tensor_meta, meta.num_inputs()),
                "outputs": infos(meta.output_tensor_meta, meta.num_outputs())}
            try:
                program.load_method(name)
                method["load_method"] = "ok"
            except Exception as e:  # noqa: BLE001 - the runtime's refusal is the answer
                method["load_method"] = f"{type(e).__name__}: {e}"
            entry["methods"][name] = method
        out[level] = entry
    with open(result + ".json", "w", encoding="utf-8") as f:
        json.dump(out, f)


def _etdump(path: str, result: str) -> None:
    from make_etdump import _reading
    with open(path, "rb") as f:
        res = _reading(f.read())
    with open(result + ".json", "w", encoding="utf-8") as out:
        json.dump(res, out)


def make_etdump(name: str) -> None:
    """ExecuTorch's reading of the ETDump wild/NAME (``deserialize_from_etdump_flatcc``,
    as make_etdump.py records it)."""
    res, _ = run_child(__file__, "etdump", os.path.join(WILD, name))
    with open(os.path.join(WILD, os.path.splitext(name)[0] + ".oracle.json"), "w",
              encoding="utf-8") as f:
        json.dump({"etdump": res}, f, indent=1, sort_keys=True)
    print(name, "error" in res and res["error"] or "read")


def make(name: str) -> None:
    """ExecuTorch's answers for wild/NAME."""
    import numpy as np
    path = os.path.join(WILD, name)
    exir, arrays = run_child(__file__, "exir", path)
    oracle: Dict[str, Any] = dict(exir) if "error" not in exir else {"exir_error": exir["error"]}
    oracle["runtime"], _ = run_child(__file__, "runtime", path)
    stem = os.path.splitext(name)[0]
    with open(os.path.join(WILD, stem + ".oracle.json"), "w", encoding="utf-8") as f:
        json.dump(oracle, f, indent=1)
    with open(os.path.join(WILD, stem + ".oracle.npz"), "wb") as f:
        np.savez_compressed(f, **arrays)
    print(name, {lv: r.get("load_program") if isinstance(r, dict) else r
                 for lv, r in oracle["runtime"].items()})


def main(argv: List[str]) -> int:
    """Command line (see the module docstring)."""
    if argv[1:2] == ["--child"]:
        {"exir": _exir, "runtime": _runtime, "etdump": _etdump}[argv[2]](argv[3], argv[4])
        return 0
    with open(os.path.join(WILD, "SOURCES.json"), encoding="utf-8") as f:
        sources = json.load(f)["files"]
    if argv[1:2] == ["--only"]:
        only = argv[2].split(",")
        sources = [s for s in sources if s["file"] in only]
    for entry in sources:
        if entry["file"].endswith((".pte", ".bpte")):
            make(entry["file"])
        elif entry["file"].endswith(".etdp"):
            make_etdump(entry["file"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
