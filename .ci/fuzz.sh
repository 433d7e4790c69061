#!/usr/bin/env bash
# Coverage-guided fuzzing of the front ends and the matcher API (issue 22), a
# short run for CI: builds the libFuzzer targets in fuzz/ on the stable
# toolchain and runs each for FUZZ_SECONDS (default 8) from the committed
# seeds. A crash, a panic, a mask that disagrees with the reference, or an
# input slower than FUZZ_TIMEOUT seconds fails the run; libFuzzer writes the
# input to fuzz/artifacts/<target>/. The long run: see fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${FUZZ_SECONDS:-8}"
# What `cargo fuzz build -s none` passes to rustc (SanitizerCoverage for
# libFuzzer's feedback, --cfg fuzzing), all stable flags: no nightly needed.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing"
# An explicit --target keeps the flags off build scripts (as cargo-fuzz does).
host="$(rustc -vV | sed -n 's/^host: //p')"
cargo build --quiet --release --target-dir target --target "$host" --bins
bin="target/$host/release"
. ./targets.sh
for t in $FUZZ_TARGETS; do
    mkdir -p "corpus/$t" "artifacts/$t"
    seeds="$(seeds_of "$t")"
    echo "fuzz: $t for ${seconds}s"
    log="artifacts/$t/log.txt"
    rc=0
    "$bin/$t" -max_total_time="$seconds" -max_len=1024 -timeout="${FUZZ_TIMEOUT:-10}" \
        -rss_limit_mb=4096 -print_final_stats=0 -artifact_prefix="artifacts/$t/" \
        "corpus/$t" "$seeds" >"$log" 2>&1 || rc=$?
    grep -E "^Done|ERROR|panicked|deadly|timeout" "$log" | head -5 || true
    if [ "$rc" -ne 0 ]; then
        grep -A12 "panicked" "$log" | head -30 || tail -30 "$log"
        echo "fuzz: $t found a failure (input in fuzz/artifacts/$t/)"
        exit 1
    fi
done
