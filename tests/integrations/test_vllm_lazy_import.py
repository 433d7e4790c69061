"""``import maskpar`` (and ``maskpar.integrations``) never imports a serving
framework or torch: the adapters import theirs only when imported themselves."""

from __future__ import annotations

import subprocess
import sys


def test_import_maskpar_imports_no_framework_and_no_torch():
    code = (
        "import sys, maskpar, maskpar.integrations\n"
        "bad = sorted(m for m in ('vllm', 'sglang', 'torch') if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip()
    assert out == "", f"import maskpar imported {out}"
