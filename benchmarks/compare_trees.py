"""Open and open + first state_dict() timed for two builds of pyflatmodule, alternating
(PTMF models and an ExecuTorch program, whose first state_dict() checks its plans).

``python benchmarks/compare_trees.py TREE_A TREE_B [ROUNDS]``: each TREE is a source tree
with its C core built in place (``python setup.py build_ext --inplace``); every round
times both, one after the other, in fresh processes, on the cached benchmark models
(``benchmodels.py`` and ``--zoo`` build them). Best of several timeit repeats; the
same session for both trees, so the machine's speed cancels out.
"""
import glob
import os
import subprocess
import sys
import timeit
from typing import Dict

from benchmodels import cache_dir

#: The models compared, by the pattern of their cached file.
MODELS = {"meta_2k": "meta_2k-full-*.ptl", "meta_20k": "meta_20k-full-*.ptl",
          "transformer": "transformer-full-*.ptl",
          "mobilenet_v2": "zoo_mobilenet_v2-full-*.ptl", "resnet18": "zoo_resnet18-full-*.ptl",
          "et_graph_22k": "et_graph_22k-full-*.pte"}


def measure(tree: str) -> None:
    """In this process: import the tree's pyflatmodule and time every cached model."""
    sys.path.insert(0, tree)
    import pyflatmodule as pfm
    assert pfm.__file__.startswith(os.path.abspath(tree)), pfm.__file__
    for name, pattern in MODELS.items():
        found = glob.glob(os.path.join(cache_dir(), pattern))
        if not found:
            print(f"{name:14s} not cached")
            continue
        path = found[0]
        opened = min(timeit.repeat(lambda: pfm.load(path), number=5, repeat=9)) / 5
        first = min(timeit.repeat(lambda: pfm.load(path).state_dict(), number=3,
                                  repeat=7)) / 3
        print(f"{name:14s} open {opened * 1e6:10.1f} us   open + state_dict "
              f"{first * 1e6:10.1f} us", flush=True)


def main() -> None:
    trees = [os.path.abspath(t) for t in sys.argv[1:3]]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(rounds):
        for tree in trees:
            print(f"== {tree}", flush=True)
            env: Dict[str, str] = dict(os.environ, PYTHONPATH=here)
            subprocess.run([sys.executable, __file__, "--measure", tree], check=True, env=env,
                           cwd="/")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        measure(sys.argv[2])
    else:
        main()
