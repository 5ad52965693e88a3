"""Fresh-interpreter measurements: cold start to the first tensor value, and RSS growth.

Each program runs as ``python -c PROGRAM PATH`` in a new process whose only extra
``sys.path`` entry is where the parent found pyflatmodule, from an empty directory.
Wall time comes from the parent; peak RSS is the child's own ``VmHWM`` read as its last
act (``ru_maxrss`` of a child counts the parent's pages it started from).
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple

import pyflatmodule

#: Cold start to the first value of the first state_dict tensor, imports included;
#: and two floors: the interpreter alone, and pyflatmodule's dependencies alone.
FIRST_VALUE = {
    "floor_python": "import sys\n",
    "floor_numpy_ml_dtypes_cffi": "import sys, numpy, ml_dtypes, cffi\n",
    "pyflatmodule": (
        "import sys, pyflatmodule as pfm\n"
        "m = pfm.load(sys.argv[1])\n"
        "w = next(iter(m.state_dict().values()))\n"
        "print(repr(float(w.flat[0])))\n"),
    # The lite module exposes no tensors to Python: the models export first_weight().
    "torch_lite": (
        "import sys, torch, torch.jit.mobile\n"
        "m = torch.jit.mobile._load_for_lite_interpreter(sys.argv[1])\n"
        "print(repr(float(m.run_method('first_weight').flatten()[0])))\n"),
    "torch_jit": (
        "import sys, torch\n"
        "m = torch.jit.jit_module_from_flatbuffer(sys.argv[1])\n"
        "w = next(iter(m.state_dict().values()))\n"
        "print(repr(float(w.flatten()[0])))\n"),
}

#: The command line start to finish (``pyflatmodule info PATH``, as the console script
#: runs it), and its floor: ``import numpy``. The last line says whether ml_dtypes was
#: imported (it must not be, for a file without its dtypes).
CLI = {
    "pyflatmodule": (
        "import sys\n"
        "from pyflatmodule.__main__ import main\n"
        "status = main(['info', sys.argv[1]])\n"
        "print(status, 'ml_dtypes' in sys.modules)\n"),
    "floor_numpy": "import sys, numpy\n",
    "floor_python": "import sys\n",
}

#: The command line on an ExecuTorch program, ``info`` and ``verify``, against the
#: interpreter alone (``python -c pass``): neither answer needs an array.
CLI_PTE = {
    "pyflatmodule_info": (
        "import sys\n"
        "from pyflatmodule.__main__ import main\n"
        "status = main(['info', sys.argv[1]])\n"
        "print(status, 'numpy' in sys.modules)\n"),
    "pyflatmodule_verify": (
        "import sys\n"
        "from pyflatmodule.__main__ import main\n"
        "status = main(['verify', sys.argv[1]])\n"
        "print(status, 'numpy' in sys.modules)\n"),
    "floor_python": "import sys\n",
}

_RSS = (
    "import json, sys\n"
    "def rss():\n"
    "    out = {}\n"
    "    with open('/proc/self/status') as f:\n"
    "        for line in f:\n"
    "            k, _, v = line.partition(':')\n"
    "            if k in ('VmRSS', 'RssAnon', 'RssFile', 'RssShmem'):\n"
    "                out[k] = int(v.split()[0])\n"
    "    return out\n")

#: A fresh process from a zoo model's lite file to all its weights: pyflatmodule's load
#: and first state_dict() (it prints the count), against torch's lite loader, which makes
#: every tensor as it loads (the lite module hands none to Python).
LOAD_WEIGHTS = {
    "pyflatmodule": (
        "import sys, pyflatmodule as pfm\n"
        "print(len(pfm.load(sys.argv[1]).state_dict()))\n"),
    "torch_lite": (
        "import sys, torch, torch.jit.mobile\n"
        "m = torch.jit.mobile._load_for_lite_interpreter(sys.argv[1])\n"),
}

#: The console command ``pyflatmodule`` that pip installs beside the interpreter, and the
#: floor for ``pyflatmodule info`` on a zoo model: the two packages pyflatmodule needs.
CONSOLE = os.path.join(os.path.dirname(sys.executable), "pyflatmodule")
FLOOR_NUMPY_CFFI = [sys.executable, "-c", "import numpy, cffi"]

#: RSS (KiB, /proc/self/status) after imports, after open, after state_dict (no weight
#: is read: only the arrays are made). pyflatmodule's imports include numpy, which the
#: package imports when it first makes an array: the growth is the file's, not numpy's.
RSS_GROWTH = {
    "pyflatmodule": _RSS + (
        "import numpy, pyflatmodule as pfm\n"
        "r0 = rss()\n"
        "m = pfm.load(sys.argv[1])\n"
        "r1 = rss()\n"
        "sd = m.state_dict()\n"
        "r2 = rss()\n"
        "print(json.dumps([r0, r1, r2, len(sd)]))\n"),
    "torch_lite": _RSS + (
        "import torch, torch.jit.mobile\n"
        "r0 = rss()\n"
        "m = torch.jit.mobile._load_for_lite_interpreter(sys.argv[1])\n"
        "r1 = rss()\n"
        "print(json.dumps([r0, r1, r1, 0]))\n"),
    "torch_jit": _RSS + (
        "import torch\n"
        "r0 = rss()\n"
        "m = torch.jit.jit_module_from_flatbuffer(sys.argv[1])\n"
        "r1 = rss()\n"
        "sd = m.state_dict()\n"
        "r2 = rss()\n"
        "print(json.dumps([r0, r1, r2, len(sd)]))\n"),
}


#: Cold start to the first value of an ExecuTorch program's first constant (in value
#: order): pyflatmodule vs ExecuTorch's Python reader (``exir``, which imports torch).
#: The benchmark programs' constants are float32.
ET_FIRST_CONSTANT = {
    "pyflatmodule": (
        "import sys, pyflatmodule as pfm\n"
        "m = pfm.load(sys.argv[1])\n"
        "print(repr(float(m.constants()[0][2].flat[0])))\n"),
    "exir": (
        "import struct, sys\n"
        "from executorch.exir._serialize._program import deserialize_pte_binary\n"
        "with open(sys.argv[1], 'rb') as f:\n"
        "    program = deserialize_pte_binary(f.read()).program\n"
        "t = next(v.val for v in program.execution_plan[0].values\n"
        "         if type(v.val).__name__ == 'Tensor' and v.val.data_buffer_idx > 0)\n"
        "data = program.constant_buffer[t.data_buffer_idx].storage\n"
        "print(repr(struct.unpack_from('<f', data)[0]))\n"),
    # The C++ runtime hands no constant to Python: its process stops after load_program
    # + load_method of every method, where the runtime has read the constants' bytes.
    "et_runtime": (
        "import sys\n"
        "from executorch.runtime import Runtime\n"
        "program = Runtime.get().load_program(sys.argv[1])\n"
        "methods = [program.load_method(n) for n in sorted(program.method_names)]\n"
        "print([type(m).__name__ for m in methods])\n"),
}

#: RSS (KiB) after imports, after open, after reading every constant (a sum over each)
#: of an ExecuTorch program, and (argv[2], optional) its data file's tensors; the
#: runtime (reference: it hands no constant to Python) after load_program + load_method.
#: numpy is imported with pyflatmodule, as in RSS_GROWTH.
ET_RSS = {
    "pyflatmodule": _RSS + (
        "import numpy, pyflatmodule as pfm\n"
        "r0 = rss()\n"
        "m = pfm.load(sys.argv[1], data=sys.argv[2:])\n"
        "r1 = rss()\n"
        "arrays = [a for _, _, a in m.constants()] + [\n"
        "    a for f in m.data_files for a in f.tensors.values()]\n"
        "total = sum(float(a.sum()) for a in arrays)\n"
        "r2 = rss()\n"
        "print(json.dumps([r0, r1, r2, len(arrays)]))\n"),
    "et_runtime": _RSS + (
        "from executorch.runtime import Runtime\n"
        "runtime = Runtime.get()\n"
        "r0 = rss()\n"
        "p = runtime.load_program(sys.argv[1], data_path=(sys.argv[2:] or [None])[0])\n"
        "r1 = rss()\n"
        "methods = [p.load_method(n) for n in p.method_names]\n"
        "r2 = rss()\n"
        "print(json.dumps([r0, r1, r2, 0]))\n"),
}


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(pyflatmodule.__file__)))
    env["PYTHONPATH"] = root
    # Use and write bytecode caches, as an installed package does (pip compiles them).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("PYTHONSTARTUP", None)
    return env


_ENV = _env()
_CWD = tempfile.mkdtemp(prefix="pfm-bench-")
atexit.register(shutil.rmtree, _CWD, True)


_HWM = ("\nwith open('/proc/self/status') as _f:\n"
        "    print('VmHWM', [_l for _l in _f if _l.startswith('VmHWM')][0].split()[1])\n")


def spawn(argv: List[str]) -> Tuple[str, float]:
    """(stdout, wall seconds) of one fresh process running ``argv`` (a command, or
    ``sys.executable`` and its arguments) in the children's environment."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.run(argv, stdout=out, stderr=err, cwd=_CWD, env=_ENV, check=False)
        wall = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise RuntimeError(f"child failed ({p.returncode}): {err.read().decode()[-2000:]}")
        return out.read().decode(), wall


def run(program: str, path: str, *more: str) -> Tuple[str, float, int]:
    """(stdout, wall seconds, peak RSS KiB) of one fresh interpreter running ``program``
    with arguments ``path`` and ``more``."""
    text, wall = spawn([sys.executable, "-c", program + _HWM, path, *more])
    lines = text.strip().splitlines()
    assert lines and lines[-1].startswith("VmHWM "), text
    return "\n".join(lines[:-1]), wall, int(lines[-1].split()[1])


def rss_growth(impl: str, path: str, *more: str,
               programs: Dict[str, str] = RSS_GROWTH) -> Dict[str, Any]:
    """RSS growth (KiB) of ``programs[impl]`` run on ``path`` (and ``more``) in a fresh
    interpreter: after open, after the second step; its file and anonymous parts."""
    text, wall, peak = run(programs[impl], path, *more)
    r0, r1, r2, n = json.loads(text.splitlines()[-1])
    return {"open_kib": r1["VmRSS"] - r0["VmRSS"], "state_dict_kib": r2["VmRSS"] - r0["VmRSS"],
            "file_kib": r2["RssFile"] - r0["RssFile"], "anon_kib": r2["RssAnon"] - r0["RssAnon"],
            "tensors": n, "peak_kib": peak, "wall": wall}
