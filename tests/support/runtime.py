"""ExecuTorch's runtime on files, away from the test process: it may crash or hang on a
bad file. One child imports the runtime once and forks a grandchild per file and level."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Sequence, Tuple

#: True when ExecuTorch's runtime can be asked.
HAS_RUNTIME = importlib.util.find_spec("executorch") is not None

#: The child: argv[1] is a JSON list of [program path, data path or null, level]; per
#: entry, a forked grandchild loads the program and every method; one JSON line each:
#: {"verdict": "ok" | "refused" | "crashed" | "hung", "detail": ...}.
_CHILD = r"""
import json, os, signal, sys, time
from executorch.runtime import Runtime, Verification
runtime = Runtime.get()
timeout = float(sys.argv[2])
for pte, ptd, level in json.load(open(sys.argv[1])):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 2)
        try:
            program = runtime.load_program(pte, verification=getattr(Verification, level),
                                           data_path=ptd)
            for name in sorted(program.method_names):
                program.load_method(name)
        except Exception as e:
            os.write(w, f"\nrefused: {type(e).__name__}: {e}".encode())
            os._exit(3)
        os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    text = os.read(r, 1 << 16).decode(errors="replace")
    err = [line for line in text.splitlines() if line][-3:]
    os.close(r)
    if not done:
        verdict = "hung"
    elif os.WIFSIGNALED(status):
        verdict = "crashed"
        err.append(signal.Signals(os.WTERMSIG(status)).name)
    else:
        verdict = {0: "ok", 3: "refused"}.get(os.WEXITSTATUS(status), "crashed")
    print(json.dumps({"verdict": verdict, "detail": "\n".join(err)}), flush=True)
"""


def runtime_verdicts(files: Sequence[Tuple[bytes, Optional[bytes]]],
                     levels: Sequence[str] = ("Minimal", "InternalConsistency"),
                     timeout: float = 20.0) -> List[Dict[str, str]]:
    """What ExecuTorch's runtime makes of each ``(program, data file or None)`` at each
    verification level (``files`` major, ``levels`` minor): per pair a dict with
    ``verdict`` (``"ok"``: the program and all its methods loaded; ``"refused"``: an
    error; ``"crashed"``: a signal or abort; ``"hung"``: past ``timeout`` seconds) and
    ``detail`` (the last lines the runtime wrote)."""
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for i, (program, data) in enumerate(files):
            pte = os.path.join(tmp, f"{i}.pte")
            with open(pte, "wb") as f:
                f.write(program)
            ptd = None
            if data is not None:
                ptd = os.path.join(tmp, f"{i}.ptd")
                with open(ptd, "wb") as f:
                    f.write(data)
            jobs += [[pte, ptd, level] for level in levels]
        with open(os.path.join(tmp, "jobs.json"), "w") as f:
            json.dump(jobs, f)
        r = subprocess.run([sys.executable, "-c", _CHILD, f.name, str(timeout)],
                           capture_output=True, text=True,
                           timeout=60 + timeout * len(jobs), check=True)
    out = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(out) == len(jobs), r.stderr[-2000:]
    return out
