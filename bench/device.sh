#!/usr/bin/env bash
# The GPU machine's checks and benchmarks (issue 26, items 5 and 6), as one
# run on a lent NVIDIA machine with 16 cores, which has torch, Triton and
# nvcc but no package registry. Prepared on the development machine:
#   .whl/      wheels of what the machine lacks, for CPython 3.12: xgrammar,
#              apache-tvm-ffi, pydantic (+ pydantic-core, annotated-types,
#              typing-inspection, typing-extensions), llguidance (1.9.1's
#              x86-64 wheel is manylinux_2_31: name that platform),
#              quicktok-v1, jsonschema (+ referencing,
#              jsonschema-specifications, rpds-py; bench_serving reorders
#              instances with it)
#   .devdata/  dev.jsonl.gz, the MaskBench dev split
#   python/maskpar/_core.abi3.so, built with
#              `cargo build --release --features python,pyo3/extension-module`
#              (without extension-module the library links libpython of the
#              build machine's Python and does not load there)
# Writes each part's output to $OUT (default /tmp/device-out); each part has
# its own time limit so one slow part cannot take the others' time.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/python PYTHONUNBUFFERED=1 MAX_JOBS=16

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    nproc
    python3 -c 'import torch, triton, llguidance, maskpar
from importlib.metadata import version
print("torch", torch.__version__, "triton", triton.__version__, "xgrammar", version("xgrammar"),
      "llguidance", llguidance.__version__, "maskpar", maskpar.__version__,
      "cuda", torch.cuda.is_available())'
} 2>&1 | tee "$OUT/env.txt"

# Most important first: a part cut by the call's own limit leaves the others' output.
# 1. The torch-facing tests on CUDA (they run on every device present).
timeout 100 python3 -m pytest -q -p no:cacheprovider \
    tests/test_torch.py tests/test_sampling.py tests/test_parallel.py \
    tests/test_errors.py::test_cuda_bitmask_is_refused 2>&1 | tee "$OUT/pytest.txt"

# 2. Applying bitmasks on CUDA: B x (K+1) rows for B in {1, 16, 64, 128}, K in {0, 4, 8}.
timeout 150 python3 bench/bench_apply.py --devices cuda --dtype float32 bfloat16 \
    --rows 1 5 9 16 64 80 128 144 320 576 640 1152 --reps 50 2>&1 | tee "$OUT/apply-cuda.txt"

# 3. Thread scaling of the serving step, B = 64, K = 4, against llguidance's
# thread pool. (xgrammar is left out: its compiles of fresh schemas on the
# 128k vocabulary take seconds each, minutes per thread count; its loop uses
# one thread whatever T is.)
# First maskpar alone, whose CPU per step is then its own, not also another
# engine's pool spinning on after that engine's call.
timeout 80 python3 bench/bench_serving.py --data .devdata/dev.jsonl.gz --batch 64 128 \
    --drafts 4 --threads 1 2 4 8 16 --steps 20 --cpu-time --engines maskpar \
    2>&1 | tee "$OUT/scaling-alone.txt"
timeout 120 python3 bench/bench_serving.py --data .devdata/dev.jsonl.gz --batch 64 \
    --drafts 4 --threads 1 2 4 8 16 --steps 20 --cpu-time --engines maskpar llguidance \
    2>&1 | tee "$OUT/scaling.txt"

# 4. Masked verification of drafts on CUDA.
timeout 50 python3 bench/bench_sampling.py --devices cuda --batch 1 16 64 128 \
    --drafts 4 8 --reps 30 2>&1 | tee "$OUT/sampling.txt"

# (Not the CPU apply: llguidance's CPU apply builds a torch.compile kernel
# with a C++ compiler on first use, longer than a minute on that machine.)
