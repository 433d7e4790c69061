"""A slow, independent reference for context-free grammar masks: a plain
byte-level Earley recognizer over a grammar AST (its own desugaring of
repetition, right-recursive where maskpar's is left-recursive). Shares no code
with maskpar and never parses GBNF text: tests build the AST and render it.

AST nodes (tuples):
  ("lit", str)                 exact ASCII text
  ("class", str, negated)      one byte from (or, negated, outside) the chars
  ("ref", name)                a rule
  ("seq", [nodes]), ("alt", [nodes])
  ("rep", node, min, max)      max None = unbounded
"""

from __future__ import annotations

from collections.abc import Sequence

Sym = tuple[str, object]  # ("t", frozenset of bytes) or ("n", name)


def render(node) -> str:
    """GBNF text for an AST node."""
    kind = node[0]
    if kind == "lit":
        return '"' + "".join(f"\\x{ord(c):02X}" for c in node[1]) + '"'
    if kind == "class":
        body = "".join(f"\\x{ord(c):02X}" for c in node[1])
        return f"[{'^' if node[2] else ''}{body}]"
    if kind == "ref":
        return node[1]
    if kind == "seq":
        return "(" + " ".join(render(x) for x in node[1]) + ")" if node[1] else '""'
    if kind == "alt":
        return "(" + " | ".join(render(x) for x in node[1]) + ")"
    if kind == "rep":
        _, x, lo, hi = node
        inner = render(x)
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        if (lo, hi) == (0, 1):
            return inner + "?"
        return inner + (f"{{{lo},}}" if hi is None else f"{{{lo},{hi}}}")
    raise ValueError(node)


class Grammar:
    """Rules as lists of alternatives of symbol sequences; start rule 'root'."""

    def __init__(self, rules: dict[str, object]):
        self.alts: dict[str, list[list[Sym]]] = {}
        self._fresh = 0
        for name in rules:
            self.alts[name] = []
        for name, body in rules.items():
            self.alts[name].append(self._lower(body))
        self._prune()
        self.nullable = self._nullable()

    def _new(self) -> str:
        self._fresh += 1
        return f"#{self._fresh}"

    def _lower(self, node) -> list[Sym]:
        kind = node[0]
        if kind == "lit":
            return [("t", frozenset([b])) for b in node[1].encode()]
        if kind == "class":
            chars = {ord(c) for c in node[1]}
            byte_set = frozenset(range(128)) - chars if node[2] else frozenset(chars)
            if node[2]:
                # Negated classes match any *character*: add every UTF-8
                # sequence start via a helper rule for non-ASCII characters.
                name = self._new()
                self.alts[name] = [[("t", frozenset([b]))] for b in sorted(byte_set)]
                self.alts[name] += self._non_ascii_char()
                return [("n", name)]
            return [("t", byte_set)]
        if kind == "ref":
            return [("n", node[1])]
        if kind == "seq":
            out: list[Sym] = []
            for x in node[1]:
                out += self._lower(x)
            return out
        if kind == "alt":
            name = self._new()
            self.alts[name] = [self._lower(x) for x in node[1]]
            return [("n", name)]
        if kind == "rep":
            _, x, lo, hi = node
            body = self._lower(x)
            out = []
            for _ in range(lo):
                out += body
            if hi is None:
                star = self._new()  # star -> ε | body star
                self.alts[star] = [[], body + [("n", star)]]
                out.append(("n", star))
            else:
                for _ in range(hi - lo):
                    opt = self._new()
                    self.alts[opt] = [[], body]
                    out.append(("n", opt))
            return out
        raise ValueError(node)

    def _non_ascii_char(self) -> list[list[Sym]]:
        cont = frozenset(range(0x80, 0xC0))
        return [
            [("t", frozenset(range(0xC2, 0xE0))), ("t", cont)],
            [("t", frozenset([0xE0])), ("t", frozenset(range(0xA0, 0xC0))), ("t", cont)],
            [
                ("t", frozenset(range(0xE1, 0xED)) | frozenset([0xEE, 0xEF])),
                ("t", cont),
                ("t", cont),
            ],
            [("t", frozenset([0xED])), ("t", frozenset(range(0x80, 0xA0))), ("t", cont)],
            [
                ("t", frozenset([0xF0])),
                ("t", frozenset(range(0x90, 0xC0))),
                ("t", cont),
                ("t", cont),
            ],
            [("t", frozenset(range(0xF1, 0xF4))), ("t", cont), ("t", cont), ("t", cont)],
            [
                ("t", frozenset([0xF4])),
                ("t", frozenset(range(0x80, 0x90))),
                ("t", cont),
                ("t", cont),
            ],
        ]

    def _prune(self) -> None:
        productive: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, alts in self.alts.items():
                if name in productive:
                    continue
                for alt in alts:
                    if all(s[0] == "t" and s[1] or s[0] == "n" and s[1] in productive for s in alt):
                        productive.add(name)
                        changed = True
                        break
        self.productive = productive
        self.alts = {
            n: [a for a in alts if all(s[0] == "t" and s[1] or s[1] in productive for s in a)]
            for n, alts in self.alts.items()
            if n in productive
        }

    def _nullable(self) -> set[str]:
        out: set[str] = set()
        changed = True
        while changed:
            changed = False
            for name, alts in self.alts.items():
                if name not in out and any(
                    all(s[0] == "n" and s[1] in out for s in a) for a in alts
                ):
                    out.add(name)
                    changed = True
        return out


Item = tuple[str, int, int, int]  # (rule name, alternative, dot, origin)


class Recognizer:
    """Earley sets over bytes; `sets[i]` after i bytes."""

    def __init__(self, g: Grammar):
        self.g = g
        self.sets: list[set[Item]] = []
        if "root" in g.alts:
            self.sets.append(
                self._closure({("root", a, 0, 0) for a in range(len(g.alts["root"]))}, 0)
            )
        else:
            self.sets.append(set())

    def _next(self, it: Item):
        alt = self.g.alts[it[0]][it[1]]
        return alt[it[2]] if it[2] < len(alt) else None

    def _closure(self, items: set[Item], k: int) -> set[Item]:
        out = set(items)
        todo = list(items)
        while todo:
            it = todo.pop()
            sym = self._next(it)
            new: list[Item] = []
            if sym is None:
                origin_set = out if it[3] == k else self.sets[it[3]]
                for p in list(origin_set):
                    if self._next(p) == ("n", it[0]):
                        new.append((p[0], p[1], p[2] + 1, p[3]))
            elif sym[0] == "n":
                name = sym[1]
                new += [(name, a, 0, k) for a in range(len(self.g.alts[name]))]
                if name in self.g.nullable:
                    new.append((it[0], it[1], it[2] + 1, it[3]))
            for x in new:
                if x not in out:
                    out.add(x)
                    todo.append(x)
        return out

    def feed(self, data: bytes) -> bool:
        """Appends sets for `data`; False (sets unchanged) if not viable."""
        added = 0
        for b in data:
            k = len(self.sets)
            kernel = {
                (it[0], it[1], it[2] + 1, it[3])
                for it in self.sets[-1]
                if (s := self._next(it)) is not None and s[0] == "t" and b in s[1]
            }
            if not kernel:
                del self.sets[len(self.sets) - added :]
                return False
            self.sets.append(self._closure(kernel, k))
            added += 1
        return True

    def pop(self, n: int) -> None:
        if n:
            del self.sets[-n:]

    def accepting(self) -> bool:
        return any(
            it[0] == "root" and it[3] == 0 and self._next(it) is None for it in self.sets[-1]
        )

    def allowed(
        self, tokens: Sequence[bytes], eos: int, never: frozenset[int], vocab_size: int
    ) -> list[int]:
        out = []
        for i in range(vocab_size):
            if i == eos:
                if self.accepting():
                    out.append(i)
            elif i < len(tokens) and i not in never and tokens[i]:
                if self.feed(tokens[i]):
                    out.append(i)
                    self.pop(len(tokens[i]))
        return out
