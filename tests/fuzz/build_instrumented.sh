#!/usr/bin/env bash
# Build a copy of pyflatmodule whose C core is instrumented for coverage-guided fuzzing:
# clang with -fsanitize=fuzzer-no-link (libFuzzer edge and comparison coverage, fed to
# atheris), AddressSanitizer, and UndefinedBehaviorSanitizer in trap mode (a finding
# is a SIGILL that libFuzzer reports as a crash; no UBSan runtime needed).
#
#   bash tests/fuzz/build_instrumented.sh OUT_DIR
#
# Leaves OUT_DIR/pyflatmodule importable (PYTHONPATH=OUT_DIR); the checkout's own
# in-place build is not touched. Needs clang (apt-get install clang); exits 3 without.
set -euo pipefail
out="${1:?usage: build_instrumented.sh OUT_DIR}"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cc="${CLANG:-$(command -v clang || command -v clang-19 || command -v clang-16 || command -v clang-15 || command -v clang-14 || true)}"
if [ -z "$cc" ]; then
    echo "build_instrumented.sh: no clang found" >&2
    exit 3
fi
rm -rf "$out"
mkdir -p "$out"
cp -r "$root/pyflatmodule" "$root/csrc" "$root/setup.py" "$root/pyproject.toml" "$root/README.md" "$out"/
rm -f "$out"/pyflatmodule/core/_c.*.so "$out"/pyflatmodule/core/_c.c "$out"/pyflatmodule/core/_c.o
cd "$out"
CC="$cc" LDSHARED="$cc -shared" \
PTMF_CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=address,fuzzer-no-link -fsanitize=undefined -fsanitize-trap=undefined" \
PTMF_LDFLAGS="-fsanitize=address,fuzzer-no-link" \
    python3 setup.py -q build_ext --inplace >/dev/null
so="$(ls "$out"/pyflatmodule/core/_c.*.so)"
if ! nm -D "$so" | grep __sanitizer_cov >/dev/null; then   # not -q: nm must not die of SIGPIPE (pipefail)
    echo "build_instrumented.sh: $so has no coverage instrumentation" >&2
    exit 1
fi
echo "$so"
