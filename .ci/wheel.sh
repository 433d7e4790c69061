#!/usr/bin/env bash
# CI: the release wheel. Builds it as a release would (abi3, manylinux_2_28,
# linked against glibc 2.28 by zig, profile-guided by .ci/pgo.sh), checks
# its tag and the glibc versions its extension needs, installs it with the
# demo's extras into a fresh virtual
# environment (no system site packages, no Rust toolchain on PATH, binary
# wheels only), and runs the demo from outside the source tree, so that the
# installed wheel, not the checkout, is what runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The build tools in a virtual environment of their own: maturin, and zig
# (from PyPI's ziglang) as the linker that targets glibc 2.28.
python3 -m venv "$WORK/tools"
"$WORK/tools/bin/python" -m pip install --quiet "maturin>=1.5,<2" ziglang
ZIG_DIR=$("$WORK/tools/bin/python" -c 'import os, ziglang; print(os.path.dirname(ziglang.__file__))')
# Compatibility (manylinux_2_28) comes from pyproject.toml's [tool.maturin];
# the build is profile-guided (.ci/pgo.sh, its workload under this python3).
PATH="$ZIG_DIR:$PATH" MATURIN="$WORK/tools/bin/maturin" bash .ci/pgo.sh "$WORK/dist" --zig

WHEEL=$(ls "$WORK"/dist/maskpar-*.whl)
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
case "$(basename "$WHEEL")" in
    "maskpar-$VERSION-cp39-abi3-manylinux_2_28_x86_64.whl") ;;
    *) echo "unexpected wheel name: $(basename "$WHEEL")" >&2; exit 1 ;;
esac
# The newest glibc symbol version the extension needs must be at most 2.28.
python3 -m zipfile -e "$WHEEL" "$WORK/unpacked"
NEWEST=$(objdump -T "$WORK"/unpacked/maskpar/_core*.so | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
if [ "$(printf '%s\nGLIBC_2.28\n' "$NEWEST" | sort -V | tail -n 1)" != "GLIBC_2.28" ]; then
    echo "the extension needs $NEWEST, newer than manylinux_2_28 allows" >&2
    exit 1
fi
echo "wheel: $(basename "$WHEEL") (newest glibc symbol: $NEWEST)"

# A user's machine: no cargo or rustc anywhere on PATH.
CLEAN_PATH=""
IFS=: read -r -a DIRS <<< "$PATH"
for d in "${DIRS[@]}"; do
    case "$d" in *cargo* | *rustup* | "") continue ;; esac
    if [ -x "$d/cargo" ] || [ -x "$d/rustc" ]; then continue; fi
    CLEAN_PATH="${CLEAN_PATH:+$CLEAN_PATH:}$d"
done
python3 -m venv "$WORK/venv"
(
    cd "$WORK"
    export PATH="$WORK/venv/bin:$CLEAN_PATH"
    unset PYTHONPATH
    if command -v cargo >/dev/null || command -v rustc >/dev/null; then
        echo "a Rust toolchain is still on PATH" >&2
        exit 1
    fi
    python -m pip install --quiet --only-binary :all: "$WHEEL[demo]"
    python - "$ROOT" "$VERSION" <<'EOF'
import os
import sys

import maskpar

root, version = sys.argv[1], sys.argv[2]
where = os.path.realpath(maskpar.__file__)
assert not where.startswith(os.path.realpath(root) + os.sep), f"imported the checkout: {where}"
assert maskpar.__version__ == version, (maskpar.__version__, version)
print(f"maskpar {maskpar.__version__} from {os.path.dirname(where)}")
EOF
    python -m maskpar.demo --batch 3 | tee "$WORK/demo.txt"
    test "$(grep -c -- '-> matches: True' "$WORK/demo.txt")" -eq 3
)
