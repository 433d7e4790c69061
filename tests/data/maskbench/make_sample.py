"""Writes dev-sample.jsonl.gz: a deterministic random sample of MaskBench's dev split.

    python tests/data/maskbench/make_sample.py [path/to/dev.jsonl.gz]

The default source is the workplace's full split: ``maskbench/dev.jsonl.gz`` under
``$MASKPAR_SHARED_DATA``, else under ``../shared/data`` beside the checkout. The
sample is SIZE files drawn with ``random.Random(SEED)`` from the files that have test
instances, kept in their order in the split, and written byte for byte the same on every
run (gzip header without a timestamp), so it can be checked against its source.
"""

from __future__ import annotations

import gzip
import os
import random
import sys

SIZE = 400
SEED = 0
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_DATA = os.environ.get("MASKPAR_SHARED_DATA") or os.path.join(
    HERE, "..", "..", "..", "..", "shared", "data"
)
DEFAULT_SOURCE = os.path.join(SHARED_DATA, "maskbench", "dev.jsonl.gz")


def main(argv: list[str]) -> None:
    import json

    source = argv[0] if argv else DEFAULT_SOURCE
    with gzip.open(source, "rt", encoding="utf-8") as f:
        lines = [line for line in f if line.strip()]
    with_tests = [i for i, line in enumerate(lines) if json.loads(line)["tests"]]
    chosen = sorted(random.Random(SEED).sample(with_tests, SIZE))
    out = os.path.join(HERE, "dev-sample.jsonl.gz")
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        for i in chosen:
            gz.write(lines[i].encode("utf-8"))
    print(f"{out}: {SIZE} of {len(lines)} files ({len(with_tests)} with tests), seed {SEED}")


if __name__ == "__main__":
    main(sys.argv[1:])
