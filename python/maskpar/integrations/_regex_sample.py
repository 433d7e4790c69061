"""A typical text of a regex (a JSON Schema ``pattern``), for warm-up samples.

The warm-up walk (``_warm``) follows a sample instance of a request's schema
and stops at the first token the grammar refuses. A string with a
``pattern`` used to get a fixed filler (``"some text"``) that most patterns
refuse, so the walk stopped there and every value after it stayed cold (49
of 294 fresh dev-split schemas stopped early, most at such a string). This
module writes a text the pattern matches instead, the way a person would
fill it in: letters from a word where a class allows letters, digits where it
asks for digits, each optional part once, a few repetitions of each loop,
the first branch of an alternation that writes something.

It reads the pattern with Python's own regex parser (``re._parser``, the
tree ``re.compile`` builds from; ``sre_parse`` before Python 3.11), which
knows the ECMA-262 syntax JSON Schema patterns use save a few forms
(``\\p{..}``, ``(?<name>..)``, ``[^]``): those give no sample, as does any
node this module does not know. Nothing here decides a mask, so a text that
misses the pattern (a lookaround, a case-insensitive flag) only ends the
walk early, as before. It never runs the pattern (a hostile one could
backtrack for ever): it only parses it and walks the tree, within
``MAX_CHARS`` characters written and a ``Budget`` of work (pattern
characters parsed, nodes visited, class items tested) that every pattern of
one schema sample shares; the parser's own recursion is bounded by the
interpreter's (a ``RecursionError`` is caught). Patterns the parser would
warn about (``_parser_would_warn``) are not parsed.
"""

from __future__ import annotations

from typing import Any

try:  # Python 3.11+
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.9 and 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

MAX_CHARS = 48
MAX_PATTERN_CHARS = 4_096
# Work one sample may take, in units of a node or alternative visited, a
# class item tested or a pattern character parsed (0.4-0.8 us each): under
# 10 ms of Python, shared by every pattern of one schema sample (``Budget``);
# a real pattern's text takes tens to hundreds.
MAX_WORK = 10_000
# Repetitions written of an unbounded loop over one character (``[a-z]+``),
# and over anything longer (``(\.[a-z]+)*``).
CHAR_LOOP = 6
GROUP_LOOP = 2

# What a class is filled from, in order of preference: the next letter of a
# word, the next digit of a number, then any character the class allows.
_WORD = "sampletextvalue"
_NUMBER = "2024051709"
_ANY = (
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    "-_.:/@ +,;=!?#$%&*()[]{}<>|~^'\"`\\\té"
)
_CATEGORIES = {
    "CATEGORY_DIGIT": str.isdigit,
    "CATEGORY_NOT_DIGIT": lambda c: not c.isdigit(),
    "CATEGORY_WORD": lambda c: c.isalnum() or c == "_",
    "CATEGORY_NOT_WORD": lambda c: not (c.isalnum() or c == "_"),
    "CATEGORY_SPACE": str.isspace,
    "CATEGORY_NOT_SPACE": lambda c: not c.isspace(),
}


_ONE_CHAR = ("IN", "ANY", "LITERAL", "NOT_LITERAL")
_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _parser_would_warn(pattern: str) -> bool:
    """Whether Python's parser would warn about ``pattern``: inside a class, a
    nested set (``[[``) or a doubled ``-``, ``&``, ``~`` or ``|``, which it
    may one day read as a set operation (a FutureWarning, which a server
    would log for each such schema; a JSON Schema pattern means them
    literally). Such a pattern gets no sample rather than a warning:
    silencing warnings (``warnings.catch_warnings``) changes process-wide
    state that the adapters' other compile threads share. A scan of the
    text, escapes skipped, slightly wider than the parser's own checks."""
    i, n, in_class, first = 0, len(pattern), False, False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i, first = i + 2, False
            continue
        if not in_class:
            if c == "[":
                if pattern.startswith("[", i + 1):
                    return True
                in_class, first = True, True
                i += 2 if pattern.startswith("^", i + 1) else 1
            else:
                i += 1
            continue
        if c == "]" and not first:
            in_class = False
        elif c in "-&~|" and pattern.startswith(c, i + 1):
            return True
        first = False
        i += 1
    return False


class _TooMuch(Exception):
    """The walk reached a bound: the text so far is the sample."""


class Budget:
    """Work left for writing samples (``MAX_WORK`` units by default), shared
    by the patterns of one schema sample so that many patterns (or one
    pattern behind many ``$ref``s) cost no more than one."""

    def __init__(self, units: int = MAX_WORK) -> None:
        self.left = units

    def spend(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise _TooMuch


class _Unknown(Exception):
    """A node this module does not write: no sample."""


def regex_sample(
    pattern: Any, min_len: int = 0, max_len: int | None = None, budget: Budget | None = None
) -> str | None:
    """A text ``pattern`` (a JSON Schema ``pattern``, searched anywhere in the
    string) plausibly matches, at most ``MAX_CHARS`` long, and of
    ``min_len`` to ``max_len`` characters where one of its fillings is (loops
    written a few times, else once more than their least, else their least);
    None where the pattern cannot be read here or ``budget`` (a fresh
    ``Budget`` if None) runs out before a text is written."""
    if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_CHARS:
        return None
    if _parser_would_warn(pattern):
        return None
    budget = budget if budget is not None else Budget()
    try:
        budget.spend(len(pattern))
        tree = list(_sre.parse(pattern))
    except Exception:  # noqa: BLE001 - any parser complaint (or RecursionError), or no budget
        return None
    first = None  # the usual filling, where no filling fits the bounds
    for extra in (None, 1, 0):
        if budget.left <= 0:
            break
        writer = _Writer(extra, budget)
        try:
            writer.seq(tree)
        except _TooMuch:
            pass
        except Exception:  # noqa: BLE001 - _Unknown, RecursionError, or a tree this module misreads
            return None
        text = "".join(writer.out)[:MAX_CHARS]
        if min_len <= len(text) and (max_len is None or len(text) <= max_len):
            return text
        first = text if first is None else first
    return first


class _Writer:
    """Writes a parsed pattern; ``extra``: each loop written that many times
    more than its least (None: a few times, ``CHAR_LOOP`` or ``GROUP_LOOP``)."""

    def __init__(self, extra: int | None, budget: Budget) -> None:
        self.extra = extra
        self.budget = budget
        self.out: list[str] = []
        self.chars = 0
        self.groups: dict[int, str] = {}
        self.letters = 0
        self.digits = 0

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.chars += len(text)
        if self.chars >= MAX_CHARS:
            raise _TooMuch

    def seq(self, nodes: list[Any]) -> None:
        for op, arg in nodes:
            self.budget.spend(1)
            self.node(str(op), arg)

    def node(self, op: str, arg: Any) -> None:
        if op == "LITERAL":
            self.emit(chr(arg))
        elif op in ("IN", "ANY", "NOT_LITERAL"):
            allowed = (
                (lambda c: c != "\n")
                if op == "ANY"
                else (lambda c: c != chr(arg))
                if op == "NOT_LITERAL"
                else _class(arg)
            )
            # Each candidate tested costs the class's items.
            self.emit(self.pick(allowed, len(arg) if op == "IN" else 1))
        elif op in _REPEATS:
            low, high, body = arg
            if self.extra is not None:
                count = min(high, low + self.extra)
            else:
                one_char = len(body) == 1 and str(body[0][0]) in _ONE_CHAR
                unbounded = high == _sre.MAXREPEAT
                want = CHAR_LOOP if one_char else GROUP_LOOP if unbounded else 1
                count = max(low, want if unbounded else min(high, want))
            for _ in range(count):
                self.budget.spend(1)  # an empty body (``(?:){99999}``) writes nothing
                self.seq(list(body))
        elif op == "SUBPATTERN":
            group, body = arg[0], arg[-1]
            start = self.chars
            self.seq(list(body))
            if group is not None:
                self.groups[group] = "".join(self.out)[start:]
        elif op == "ATOMIC_GROUP":
            self.seq(list(arg))
        elif op == "BRANCH":
            self.branch(arg[1])
        elif op == "GROUPREF":
            self.emit(self.groups.get(arg, ""))
        elif op in ("AT", "ASSERT", "ASSERT_NOT"):
            pass  # anchors and lookarounds write nothing
        else:
            raise _Unknown(op)

    def branch(self, alternatives: list[Any]) -> None:
        """The first alternative that writes something (``^$|...`` allows
        the empty string, but a model fills the field in)."""
        for alt in alternatives:
            self.budget.spend(1)  # empty alternatives (``(?:|||...)``) visit no node
            if self.writes(alt):
                self.seq(list(alt))
                return
        if alternatives:
            self.seq(list(alternatives[0]))

    def pick(self, allowed: Any, cost: int) -> str:
        """The next letter of a word or digit of a number where the class
        allows it, else the first character it allows (``cost``: the work
        of one test)."""
        letter = _WORD[self.letters % len(_WORD)]
        self.budget.spend(cost)
        if allowed(letter):
            self.letters += 1
            return letter
        digit = _NUMBER[self.digits % len(_NUMBER)]
        self.budget.spend(cost)
        if allowed(digit):
            self.digits += 1
            return digit
        for c in _ANY:
            self.budget.spend(cost)
            if allowed(c):
                return c
        raise _Unknown("an empty class")

    def writes(self, nodes: Any) -> bool:
        """Whether a sequence surely writes a character (a literal or a
        class outside any optional part)."""
        for op, arg in nodes:
            self.budget.spend(1)
            name = str(op)
            if name in _ONE_CHAR:
                return True
            if name in _REPEATS and arg[0] > 0:
                return True
            if name == "SUBPATTERN" and self.writes(arg[-1]):
                return True
        return False


def _class(items: list[Any]) -> Any:
    """Membership in a ``[...]`` class as the parser lists it."""
    negate = bool(items) and str(items[0][0]) == "NEGATE"
    tests = []
    for op, arg in items[1:] if negate else items:
        name = str(op)
        if name == "LITERAL":
            tests.append(lambda c, v=arg: ord(c) == v)
        elif name == "RANGE":
            tests.append(lambda c, r=arg: r[0] <= ord(c) <= r[1])
        elif name == "CATEGORY" and str(arg) in _CATEGORIES:
            tests.append(_CATEGORIES[str(arg)])
        else:
            raise _Unknown(name)
    return lambda c: any(t(c) for t in tests) != negate
