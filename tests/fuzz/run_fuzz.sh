#!/usr/bin/env bash
# Bounded coverage-guided fuzz run of load() + full decode (atheris), for CI and by hand:
#
#   bash tests/fuzz/run_fuzz.sh [SECONDS] [extra libFuzzer flags...]     # default 120 s
#
# With clang on PATH the C core is rebuilt in a temporary directory with
# -fsanitize=fuzzer-no-link (C coverage), ASan and UBSan (trap mode), and the harness
# runs on that copy with atheris' ASan+libFuzzer runtime preloaded; without clang it
# fuzzes the normal build (Python coverage only; a C crash is still caught). The
# checked-in corpus tests/fuzz/corpus is read, never written: new inputs go to a
# temporary corpus (printed at the end; merge interesting ones by hand, see
# tests/fuzz/README.md). Exits non-zero on any finding (crash, hang, leak of an
# exception other than a well-formed FormatError, memory over the limit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${1:-120}"
shift || true
python3 -c "import atheris" 2>/dev/null || {
    echo "run_fuzz.sh: atheris is not installed (pip install atheris)" >&2
    exit 2
}
tmp="$(mktemp -d "${TMPDIR:-/tmp}/pyflatmodule-fuzz.XXXXXX")"
work="$tmp/corpus"
mkdir -p "$work"
preload=""
if bash "$here/build_instrumented.sh" "$tmp/build" >/dev/null; then
    export PFM_FUZZ_BUILD="$tmp/build"
    preload="$(python3 -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so"
    echo "run_fuzz.sh: C core instrumented (coverage, ASan, UBSan): $tmp/build"
else
    echo "run_fuzz.sh: no clang: fuzzing the normal build (Python coverage only)"
fi
status=0
(
    cd "$tmp"
    LD_PRELOAD="$preload" \
    ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:abort_on_error=0" \
        python3 "$here/fuzz_load.py" -max_total_time="$seconds" -print_final_stats=1 \
            -artifact_prefix="$tmp/finding-" "$@" "$work" "$here/corpus"
) || status=$?
echo "run_fuzz.sh: new corpus entries: $(ls "$work" | wc -l) in $work"
if [ "$status" -ne 0 ]; then
    echo "run_fuzz.sh: FINDING (exit $status); inputs: $(ls "$tmp"/finding-* 2>/dev/null || true)" >&2
    for f in "$tmp"/finding-*; do
        [ -f "$f" ] && env -u PFM_FUZZ_BUILD python3 "$here/fuzz_load.py" --replay "$f" || true
    done
fi
exit "$status"
