#!/usr/bin/env bash
# The long fuzz run (issue 22): every target at once, each with WORKERS
# libFuzzer workers (fork mode) for SECONDS, keeping going past findings so one
# crash does not end the run. Meant for a machine with cores to spare (the
# 16-core GPU machine, when one is lent); .ci/fuzz.sh is the short CI run.
#
#   fuzz/long_run.sh [BIN_DIR] [OUT_DIR]
#     BIN_DIR  the built targets (default: fuzz/target/<host>/release; build
#              them with .ci/fuzz.sh or as it does). Stripped copies work.
#     OUT_DIR  corpus/<target>, artifacts/<target> (crashes, timeouts, OOMs)
#              and logs/<target>.txt (default: fuzz/, beside the seeds).
#   SECONDS_PER_TARGET (default 3600), WORKERS (default 1), FUZZ_TIMEOUT (10),
#   FUZZ_MAX_LEN (4096), FUZZ_NICE (10).
#
# Known hangs are not filtered (MASKPAR_FUZZ_ALL=1): a long run looks for
# everything. Each target's summary line (runs, corpus, crashes, timeouts,
# OOMs) is printed at the end; the inputs are in OUT_DIR/artifacts/<target>/.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
host="$(uname -m)-unknown-linux-gnu"
bin="${1:-$here/target/$host/release}"
out="${2:-$here}"
seconds="${SECONDS_PER_TARGET:-3600}"
workers="${WORKERS:-1}"
. "$here/targets.sh"
export MASKPAR_FUZZ_ALL=1
mkdir -p "$out/logs"
for t in $FUZZ_TARGETS; do
    seeds="$here/$(seeds_of "$t")"
    mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
    nice -n "${FUZZ_NICE:-10}" "$bin/$t" -fork="$workers" -ignore_crashes=1 \
        -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
        -max_len="${FUZZ_MAX_LEN:-4096}" -timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb=4096 \
        -artifact_prefix="$out/artifacts/$t/" "$out/corpus/$t" "$seeds" \
        >"$out/logs/$t.txt" 2>&1 &
done
wait
for t in $FUZZ_TARGETS; do
    # fork mode's last status line: "#N: cov: C ft: F corp: K exec/s: E oom/timeout/crash: a/b/c time: Ts job: J dft_time: ..."
    last="$(grep -E '^#[0-9]+: cov:' "$out/logs/$t.txt" | tail -1)"
    echo "$t: ${last:-no status line (see $out/logs/$t.txt)}"
    ls "$out/artifacts/$t" | sed 's/^/    /'
done
