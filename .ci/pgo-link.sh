#!/usr/bin/env bash
# The linker of .ci/pgo.sh's instrumented build: rustc asks for the profiler
# runtime with `-u __llvm_profile_runtime`, which zig's cc (maturin --zig)
# reads as an input file; spelled `-Wl,--undefined=...` here, then handed to
# the linker the build had (named by $PGO_LINKER_VAR: cargo's
# CARGO_TARGET_<TRIPLE>_LINKER, which maturin sets), or cc.
set -euo pipefail
args=()
while [ $# -gt 0 ]; do
    if [ "$1" = "-u" ] && [ $# -gt 1 ]; then
        args+=("-Wl,--undefined=$2")
        shift 2
        continue
    fi
    args+=("$1")
    shift
done
linker=${PGO_LINKER_VAR:+${!PGO_LINKER_VAR:-}}
exec "${linker:-cc}" "${args[@]}"
