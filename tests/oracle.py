"""Independent reference for regex masks: Python's `regex` module with partial
matching, applied to every token by brute force. Shares no code with maskpar.

A token is allowed after `prefix` iff the bytes prefix + token can still be
extended to a full match. The bytes may end inside a UTF-8 character; then we
ask whether *some* completion of that character keeps a partial match. The
completions of a UTF-8 prefix form one interval of code points, and a regex
built from literals, classes and `.` treats every code point between two
consecutive "cut points" (class endpoints) alike, so testing the interval's
ends and the cut points inside it is exhaustive.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import regex

# Allowed range of the byte after a lead byte (RFC 3629).
_SECOND = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
_EXTRA_CUTS = (0, 0x09, 0x0A, 0x0B, 0xD7FF, 0xE000, 0x10FFFF)


def _seq_len(lead: int) -> int:
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _completion_range(tail: bytes) -> tuple[int, int] | None:
    """Code points whose UTF-8 encoding starts with `tail` (1..3 bytes of an
    incomplete character), as an inclusive interval; None if there are none."""
    n = _seq_len(tail[0])
    if n == 0 or len(tail) >= n:
        return None
    lo2, hi2 = _SECOND.get(tail[0], (0x80, 0xBF))
    for i, b in enumerate(tail[1:], start=1):
        lo, hi = (lo2, hi2) if i == 1 else (0x80, 0xBF)
        if not lo <= b <= hi:
            return None
    ends = []
    for pick in (0, 1):
        seq = bytearray(tail)
        for i in range(len(tail), n):
            lo, hi = (lo2, hi2) if i == 1 else (0x80, 0xBF)
            seq.append(hi if pick else lo)
        ends.append(ord(bytes(seq).decode("utf-8")))
    return ends[0], ends[1]


def _split_utf8(data: bytes) -> tuple[str, bytes] | None:
    """(decoded text, incomplete trailing bytes) or None if `data` is not a
    prefix of any valid UTF-8 string."""
    for k in range(0, min(3, len(data)) + 1):
        head, tail = data[: len(data) - k], data[len(data) - k :]
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if k == 0 or _completion_range(tail) is not None:
            return text, tail
    return None


# The `regex` module backtracks: some generated patterns (nested
# quantifiers) take exponential time. Past this, a match raises TimeoutError
# and the test drops the example (it cannot be judged, not that it passed).
ORACLE_TIMEOUT_S = 2.0


class RegexOracle:
    def __init__(self, pattern: str, cut_points: Iterable[int]):
        self.rx = regex.compile(pattern)
        cuts: set[int] = set(_EXTRA_CUTS)
        for c in cut_points:
            cuts.update((c - 1, c, c + 1))
        self.cuts = sorted(c for c in cuts if 0 <= c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF)

    def live(self, data: bytes) -> bool:
        """True if `data` can be extended to a full match."""
        split = _split_utf8(data)
        if split is None:
            return False
        text, tail = split
        if not tail:
            return self.rx.fullmatch(text, partial=True, timeout=ORACLE_TIMEOUT_S) is not None
        lo, hi = _completion_range(tail)  # type: ignore[misc]
        candidates = {lo, hi} | {c for c in self.cuts if lo <= c <= hi}
        return any(
            self.rx.fullmatch(text + chr(c), partial=True, timeout=ORACLE_TIMEOUT_S) is not None
            for c in candidates
            if not 0xD800 <= c <= 0xDFFF
        )

    def accepts(self, data: bytes) -> bool:
        try:
            return self.rx.fullmatch(data.decode("utf-8"), timeout=ORACLE_TIMEOUT_S) is not None
        except UnicodeDecodeError:
            return False

    def allowed(
        self,
        prefix: bytes,
        tokens: Sequence[bytes],
        eos_ids: Sequence[int],
        never: set[int],
        vocab_size: int,
    ) -> list[int]:
        """Brute force over the vocabulary: the ids the mask must allow."""
        out = []
        accepting = self.accepts(prefix)
        for i in range(vocab_size):
            if i in eos_ids:
                if accepting:
                    out.append(i)
            elif i < len(tokens) and i not in never and tokens[i] and self.live(prefix + tokens[i]):
                out.append(i)
        return out
