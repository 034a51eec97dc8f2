"""Constant folding of a generated procedure: what a fragment written for every case becomes where a
template gives it a literal (`outcome = 'Sent'`).

A fragment states a rule once, for every value of its arguments (`IF({{outcome}} = 'Sent', ...)`). Where
a template instantiates it with a literal, the server would still fix and evaluate every branch of it on
every execution; folded here, the generated procedure holds only what that literal makes, and the rule
is still written once. Only what is certain is folded, and nothing else is touched:

- a condition (the first argument of IF(), a searched CASE's WHEN, a statement IF's or ELSEIF's, a
  WHERE clause) is folded through AND, OR, NOT and parentheses with SQL's three-valued logic, where its
  comparisons have literals on both sides: `=`/`<>` of two numbers, or of two plain ASCII strings that
  differ in more than letter case and trailing spaces (or are identical); `<`, `>` of numbers; IN and
  NOT IN of literals; IS [NOT] NULL of a literal. Anything else is left as written;
- IF() with a constant condition becomes the branch taken, a simple CASE of a literal over literals the
  result chosen, a searched CASE loses the branches that cannot be taken;
- a statement IF with a constant condition becomes the statements of the branch taken (or nothing);
- COALESCE() loses its NULL arguments (and ends at a literal); LEFT(), CONCAT() and CHAR_LENGTH() of
  NULL are NULL;
- an UPDATE's SET list loses an assignment of a column to itself.

A value put in place of an expression is wrapped in parentheses unless it is one token, a name, a call,
a CASE or already parenthesised, so precedence never changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(
    r"""(?P<ws>\s+)
      | (?P<comment>--(?=\s)[^\n]*|\#[^\n]*|/\*.*?\*/)
      | (?P<str>'(?:[^'\\]|\\.|'')*')
      | (?P<dq>"(?:[^"\\]|\\.|"")*")
      | (?P<bq>`[^`]*`)
      | (?P<num>\d+(?:\.\d+)?(?![A-Za-z_]))
      | (?P<word>[A-Za-z_$0-9][A-Za-z0-9_$]*)
      | (?P<op><=>|<=|>=|<>|!=|:=|\|\||&&|.)""",
    re.X | re.S,
)

_STATEMENT_START = {";", "THEN", "ELSE", "BEGIN", "DO", "LOOP", "REPEAT", ":"}
_OPERAND_STOP_WORDS = {"AND", "OR", "XOR", "NOT", "IS", "IN", "BETWEEN", "LIKE", "REGEXP", "RLIKE",
                       "WHEN", "THEN", "ELSE", "END", "ESCAPE"}  # fmt: skip
_COMPARISONS = {"=", "<>", "!=", "<", "<=", ">", ">="}
_OPERAND_STOP_OPS = _COMPARISONS | {"<=>", "||", "&&", ",", ";"}
_WHERE_END = {"ORDER", "GROUP", "HAVING", "LIMIT", "FOR", "LOCK", "UNION", "INTO", "WINDOW", "RETURNING"}
_PLAIN = re.compile(r"[A-Za-z0-9_ ]*")
_NULL_IN_NULL_OUT = {"LEFT", "CONCAT", "CHAR_LENGTH"}


class _Unknown(Exception):
    """Not a form this module folds: the text is left as written."""


NULL = "NULL"  # the constant SQL NULL (True and False are the other constants; None: not constant)


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    end: int

    @property
    def up(self) -> str:
        return self.text.upper() if self.kind == "word" else self.text


@dataclass
class _Literal:
    kind: str  # 'str', 'num', 'null', 'bool'
    value: object


@dataclass
class _Node:
    """A condition's parse: `first`..`last` its tokens; `kind` and, for AND/OR/NOT/paren, children."""

    kind: str
    first: int
    last: int
    children: list[_Node] = field(default_factory=list)
    const: object = None
    sides: tuple[tuple[int, int], tuple[int, int]] | None = None  # a comparison's operands


@dataclass
class _Block:
    kind: str  # 'if', 'case', 'begin', 'loop'
    opener: int
    marks: list[int] = field(default_factory=list)  # WHEN/THEN/ELSEIF/ELSE at this level
    end: int = -1
    semicolon: int = -1


class _Source:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks: list[_Tok] = []
        for match in _TOKEN.finditer(text):
            kind = match.lastgroup or "op"
            if kind not in ("ws", "comment"):
                self.toks.append(_Tok(kind, match.group(), match.start(), match.end()))
        self.match: dict[int, int] = {}
        stack: list[int] = []
        for i, tok in enumerate(self.toks):
            if tok.text == "(":
                stack.append(i)
            elif tok.text == ")" and stack:
                opened = stack.pop()
                self.match[opened] = i
        self.blocks: list[_Block] = []
        self.block_at: dict[int, _Block] = {}
        self._scan_blocks()

    def up(self, i: int) -> str:
        return self.toks[i].up if 0 <= i < len(self.toks) else ""

    def span(self, first: int, last: int) -> str:
        return self.text[self.toks[first].start : self.toks[last].end]

    def _scan_blocks(self) -> None:
        stack: list[_Block] = []
        i = 0
        while i < len(self.toks):
            word, before = self.up(i), self.up(i - 1)
            top = stack[-1] if stack else None
            opens_statement = before in _STATEMENT_START and not (
                top is not None and top.kind == "case" and before in ("THEN", "ELSE")
            )
            if word == "END":
                block = stack.pop() if stack else None
                after = self.up(i + 1)
                closes = i
                if after in ("IF", "LOOP", "WHILE", "REPEAT", "CASE"):
                    closes = i + 1
                    if after == "CASE" and block is not None:
                        block.kind = "case statement"  # not an expression: never folded
                if block is not None:
                    block.end = i
                    block.semicolon = closes + 1 if self.up(closes + 1) == ";" else -1
                i = closes + 1
                continue
            if word == "CASE":
                stack.append(self._open("case", i))
            elif word == "BEGIN":
                stack.append(self._open("begin", i))
            elif word == "IF" and (i == 0 or opens_statement):
                stack.append(self._open("if", i))
            elif word in ("LOOP", "WHILE", "REPEAT") and (i == 0 or opens_statement or before == ":"):
                stack.append(self._open("loop", i))
            elif top is not None and (
                (top.kind == "case" and word in ("WHEN", "THEN", "ELSE"))
                or (top.kind == "if" and word in ("THEN", "ELSEIF", "ELSE"))
            ):
                top.marks.append(i)
            i += 1

    def _open(self, kind: str, i: int) -> _Block:
        block = _Block(kind, i)
        self.blocks.append(block)
        self.block_at[i] = block
        return block

    def skip(self, i: int) -> int:
        """The token after the group that starts at i (a parenthesis or a CASE), else i + 1."""
        if self.toks[i].text == "(" and i in self.match:
            return self.match[i] + 1
        block = self.block_at.get(i)
        if block is not None and block.kind == "case" and block.end > i:
            return block.end + 1
        return i + 1

    def commas(self, first: int, last: int) -> list[tuple[int, int]]:
        """first..last split at the commas not inside a group: [(first, last), ...]."""
        parts, start, i = [], first, first
        while i <= last:
            if self.toks[i].text == ",":
                parts.append((start, i - 1))
                start = i + 1
                i += 1
            else:
                i = self.skip(i)
        parts.append((start, last))
        return parts

    # --- conditions -------------------------------------------------------------------------------

    def literal(self, first: int, last: int) -> _Literal | None:
        if first != last:
            return None
        tok = self.toks[first]
        if self.up(first - 1) == ".":
            return None
        if tok.kind == "num":
            return _Literal("num", float(tok.text))
        if tok.kind == "str" and "\\" not in tok.text and "''" not in tok.text:
            return _Literal("str", tok.text[1:-1])
        if tok.up == "NULL":
            return _Literal("null", None)
        if tok.up in ("TRUE", "FALSE"):
            return _Literal("num", 1.0 if tok.up == "TRUE" else 0.0)
        return None

    def condition(self, first: int, last: int) -> _Node:
        node, after = self._or(first, last)
        if after != last + 1:
            raise _Unknown
        return node

    def _chain(self, kind: str, words: tuple[str, ...], part, first: int, last: int) -> tuple[_Node, int]:  # type: ignore[no-untyped-def]
        node, i = part(first, last)
        children = [node]
        while i <= last and self.up(i) in words:
            node, i = part(i + 1, last)
            children.append(node)
        if len(children) == 1:
            return children[0], i
        return _Node(kind, first, children[-1].last, children), i

    def _or(self, first: int, last: int) -> tuple[_Node, int]:
        return self._chain("or", ("OR",), self._and, first, last)

    def _and(self, first: int, last: int) -> tuple[_Node, int]:
        return self._chain("and", ("AND",), self._not, first, last)

    def _not(self, first: int, last: int) -> tuple[_Node, int]:
        if first <= last and self.up(first) == "NOT":
            child, i = self._not(first + 1, last)
            return _Node("not", first, child.last, [child]), i
        return self._predicate(first, last)

    def _operand(self, first: int, last: int) -> int:
        """The last token of the operand that starts at first."""
        i = first
        while i <= last:
            tok = self.toks[i]
            if tok.up in _OPERAND_STOP_WORDS and tok.kind == "word" and self.up(i - 1) != ".":
                break
            if tok.kind == "op" and tok.text in _OPERAND_STOP_OPS:
                break
            if tok.text == ")":
                raise _Unknown
            i = self.skip(i)
        if i == first:
            raise _Unknown
        return i - 1

    def _predicate(self, first: int, last: int) -> tuple[_Node, int]:
        end = self._operand(first, last)
        left = self._boolean_operand(first, end)
        i = end + 1
        word = self.up(i) if i <= last else ""
        negated = word == "NOT" and self.up(i + 1) in ("IN", "BETWEEN", "LIKE", "REGEXP", "RLIKE")
        if negated:
            i += 1
            word = self.up(i)
        if word in _COMPARISONS:
            right_end = self._operand(i + 1, last)
            node = _Node(
                "cmp", first, right_end, sides=((first, end), (i + 1, right_end)) if word == "=" else None
            )
            node.const = self._compare(self.literal(first, end), word, self.literal(i + 1, right_end))
            return node, right_end + 1
        if word == "IS":
            j = i + 1
            not_ = self.up(j) == "NOT"
            j += 1 if not_ else 0
            if j > last or self.up(j) not in ("NULL", "TRUE", "FALSE", "UNKNOWN"):
                raise _Unknown
            node = _Node("is", first, j)
            if not_ and self.up(j) == "NULL":
                node.kind, node.sides = "is not null", ((first, end), (first, end))
            value = self.literal(first, end)
            if value is not None and self.up(j) == "NULL":
                node.const = (value.kind == "null") != not_
            return node, j + 1
        if word == "IN":
            if i + 1 > last or self.toks[i + 1].text != "(" or i + 1 not in self.match:
                raise _Unknown
            close = self.match[i + 1]
            node = _Node("in", first, close)
            items = [self.literal(a, b) for a, b in self.commas(i + 2, close - 1)]
            node.const = self._in(self.literal(first, end), items, negated)
            return node, close + 1
        if word == "BETWEEN":
            low = self._operand(i + 1, last)
            if self.up(low + 1) != "AND":
                raise _Unknown
            high = self._operand(low + 2, last)
            return _Node("opaque", first, high), high + 1
        if word in ("LIKE", "REGEXP", "RLIKE"):
            pattern = self._operand(i + 1, last)
            if self.up(pattern + 1) == "ESCAPE":
                pattern = self._operand(pattern + 2, last)
            return _Node("opaque", first, pattern), pattern + 1
        return left, i

    def _boolean_operand(self, first: int, last: int) -> _Node:
        if self.toks[first].text == "(" and self.match.get(first) == last and self.up(first + 1) != "SELECT":
            try:
                inner = self.condition(first + 1, last - 1)
            except _Unknown:
                return _Node("opaque", first, last)
            return _Node("paren", first, last, [inner])
        node = _Node("opaque", first, last)
        value = self.literal(first, last)
        if value is not None and value.kind == "null":
            node.const = NULL
        elif value is not None and value.kind == "num":
            node.const = value.value != 0
        return node

    @staticmethod
    def _equal(a: _Literal, b: _Literal) -> object:
        if a.kind == "null" or b.kind == "null":
            return NULL
        if a.kind == "num" and b.kind == "num":
            return a.value == b.value
        if a.kind == "str" and b.kind == "str":
            x, y = str(a.value), str(b.value)
            if x == y:
                return True
            if _PLAIN.fullmatch(x) and _PLAIN.fullmatch(y) and x.lower().rstrip() != y.lower().rstrip():
                return False
        return None

    def _compare(self, a: _Literal | None, op: str, b: _Literal | None) -> object:
        if a is None or b is None:
            return None
        if a.kind == "null" or b.kind == "null":
            return NULL
        if op in ("=", "<>", "!="):
            equal = self._equal(a, b)
            return equal if op == "=" or equal is None else not equal
        if a.kind == "num" and b.kind == "num":
            x, y = float(a.value), float(b.value)  # type: ignore[arg-type]
            return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
        return None

    def _in(self, value: _Literal | None, items: list[_Literal | None], negated: bool) -> object:
        if value is None or any(item is None for item in items):
            return None
        if value.kind == "null":
            return NULL
        results = [self._equal(value, item) for item in items]  # type: ignore[arg-type]
        if True in results:
            found: object = True
        elif None in results:
            return None
        elif NULL in results:
            return NULL
        else:
            found = False
        return (not found) if negated else found

    def fold(self, node: _Node, positive: bool = True) -> tuple[str, object]:
        """The condition's text once folded, and its value when it has one. `positive`: the condition
        is only tested for truth and is not under a NOT, so NULL and FALSE are alike there."""
        if node.kind == "paren":
            text, const = self.fold(node.children[0], positive)
            inner = node.children[0]
            return (
                self.text[self.toks[node.first].start : self.toks[inner.first].start]
                + text
                + self.text[self.toks[inner.last].end : self.toks[node.last].end],
                const,
            )
        if node.kind == "not":
            text, const = self.fold(node.children[0], False)
            if const is not None:
                return "", (NULL if const is NULL else not const)
            child = node.children[0]
            return self.text[self.toks[node.first].start : self.toks[child.first].start] + text, None
        if node.kind in ("and", "or"):
            folded = [self.fold(child, positive) for child in node.children]
            consts = [const for _, const in folded]
            absorbing, neutral = (False, True) if node.kind == "and" else (True, False)
            if absorbing in consts:
                return "", absorbing
            if all(const is not None for const in consts):
                return "", neutral if all(const is neutral for const in consts) else NULL
            kept = [k for k, const in enumerate(consts) if const is not neutral]
            pieces = []
            for n, k in enumerate(kept):
                if n:
                    pieces.append(
                        self.text[
                            self.toks[node.children[k - 1].last].end : self.toks[node.children[k].first].start
                        ]
                    )
                text, _ = folded[k]
                pieces.append(
                    text if consts[k] is None else self.span(node.children[k].first, node.children[k].last)
                )
            return "".join(pieces), None
        if node.kind == "is not null" and node.const is None and node.sides is not None:
            test = self._is_not_null(*node.sides[0], positive)
            if test is not None:
                return test, None
        if node.kind == "cmp" and node.const is None and positive and node.sides is not None:
            for case, other in (node.sides, node.sides[::-1]):
                found = self._case_is(case, other)
                if found is not None:
                    return found
        return self.span(node.first, node.last), node.const

    def _never_null(self, first: int, last: int) -> bool:
        """A literal other than NULL, or CONCAT() or INSERT() of such: never NULL."""
        value = self.literal(first, last)
        if value is not None:
            return value.kind != "null"
        if (
            self.up(first) in ("CONCAT", "INSERT")
            and self.toks[first + 1].text == "("
            and self.skip(first + 1) == last + 1
        ):
            return all(self._never_null(a, b) for a, b in self.commas(first + 2, last - 1))
        return False

    def _is_not_null(self, first: int, last: int, positive: bool) -> str | None:
        """`x IS NOT NULL` without computing x, where x is COALESCE() (any of its arguments is not
        NULL), INSERT(s, n, m, t) of literals n, m, t (s is not NULL) or, where only NULL and FALSE
        are alike, a searched CASE whose every result is never NULL (one of its conditions holds)."""
        name = self.up(first)
        if (
            name in ("COALESCE", "INSERT")
            and self.toks[first + 1].text == "("
            and self.skip(first + 1) == last + 1
        ):
            args = self.commas(first + 2, last - 1)
            if name == "COALESCE":
                return " OR ".join(f"{self.span(*arg)} IS NOT NULL" for arg in args)
            if len(args) == 4 and all(self._never_null(*arg) for arg in args[1:]):
                return f"{self.span(*args[0])} IS NOT NULL"
            return None
        block = self.block_at.get(first)
        if not positive or block is None or block.kind != "case" or block.end != last:
            return None
        marks = block.marks
        if not marks or marks[0] != block.opener + 1 or len(marks) % 2:
            return None
        pairs = list(zip(marks[::2], marks[1::2], strict=True))
        if any(self.up(when) != "WHEN" or self.up(then) != "THEN" for when, then in pairs):
            return None
        ends = [when for when, _ in pairs[1:]] + [block.end]
        if not all(self._never_null(then + 1, end - 1) for (_, then), end in zip(pairs, ends, strict=True)):
            return None
        return " OR ".join(f"({self.span(when + 1, then - 1)})" for when, then in pairs)

    def _case_is(self, case: tuple[int, int], other: tuple[int, int]) -> tuple[str, object] | None:
        """`CASE s WHEN l1 THEN r1 ... END = v`, every l, r and v a literal, where only NULL and
        FALSE are alike: true exactly when s = the l of the one branch whose r is v (no branch: false)."""
        block = self.block_at.get(case[0])
        value = self.literal(*other)
        if (
            block is None
            or block.kind != "case"
            or block.end != case[1]
            or value is None
            or value.kind == "null"
        ):
            return None
        marks = block.marks
        if not marks or marks[0] == block.opener + 1:
            return None
        pairs, k = [], 0
        while k + 1 < len(marks) and self.up(marks[k]) == "WHEN" and self.up(marks[k + 1]) == "THEN":
            end = marks[k + 2] if k + 2 < len(marks) else block.end
            pairs.append(((marks[k] + 1, marks[k + 1] - 1), self.literal(marks[k + 1] + 1, end - 1)))
            k += 2
        otherwise = None
        if k < len(marks):
            if k != len(marks) - 1 or self.up(marks[k]) != "ELSE":
                return None
            otherwise = self.literal(marks[k] + 1, block.end - 1)
            if otherwise is None:
                return None
        if any(result is None or self.literal(*when) is None for when, result in pairs):
            return None
        results = [self._equal(result, value) for _, result in pairs]  # type: ignore[arg-type]
        if otherwise is not None and otherwise.kind != "null":
            results.append(self._equal(otherwise, value))
            if results.pop() is not False:
                return None
        if any(r is None or r is NULL for r in results) or results.count(True) > 1:
            return None
        if True not in results:
            return "", False
        chosen = results.index(True)
        when = pairs[chosen][0]
        chosen_value = self.literal(*when)
        earlier = [self.literal(*pairs[j][0]) for j in range(chosen)]
        if chosen_value is None or any(
            v is None or self._equal(v, chosen_value) is not False for v in earlier
        ):
            return None
        return f"{_value(self, block.opener + 1, marks[0] - 1)} = {self.span(*when)}", None


def _is_atomic(source: _Source, first: int, last: int) -> bool:
    if first == last:
        return True
    if source.skip(first) == last + 1:  # (...) or CASE ... END
        return True
    i = first
    while i + 2 <= last and source.toks[i].kind == "word" and source.toks[i + 1].text == ".":
        i += 2
    if i == last and source.toks[i].kind in ("word", "bq"):
        return True
    return (
        source.toks[i].kind == "word"
        and i + 1 <= last
        and source.toks[i + 1].text == "("
        and source.skip(i + 1) == last + 1
    )


def _value(source: _Source, first: int, last: int) -> str:
    text = source.span(first, last)
    return text if _is_atomic(source, first, last) else f"({text})"


def _truth(const: object) -> bool:
    return const is True


def _fold_call(source: _Source, i: int) -> tuple[int, int, str] | None:
    name, opened = source.up(i), i + 1
    close = source.match.get(opened)
    if close is None or close == opened + 1:
        return None
    args = source.commas(opened + 1, close - 1)
    if name == "IF" and len(args) == 3:
        try:
            condition = source.condition(*args[0])
        except _Unknown:
            return None
        text, const = source.fold(condition)
        if const is not None:
            return i, close, _value(source, *(args[1] if _truth(const) else args[2]))
        if text != source.span(*args[0]):
            return args[0][0], args[0][1], text
        return None
    if name == "COALESCE":
        values = [source.literal(a, b) for a, b in args]
        kept = [arg for arg, value in zip(args, values, strict=True) if value is None or value.kind != "null"]
        for k, arg in enumerate(kept):
            value = source.literal(*arg)
            if value is not None:  # a literal is never NULL here: what follows it is never read
                kept = kept[: k + 1]
                break
        if len(kept) == len(args):
            return None
        if not kept:
            return i, close, "NULL"
        if len(kept) == 1:
            return i, close, _value(source, *kept[0])
        return i, close, "COALESCE(" + ", ".join(source.span(*arg) for arg in kept) + ")"
    if name in _NULL_IN_NULL_OUT and any(
        (v := source.literal(*arg)) is not None and v.kind == "null" for arg in args
    ):
        return i, close, "NULL"
    return None


def _fold_case(source: _Source, block: _Block) -> tuple[int, int, str] | None:
    marks = block.marks
    if block.end < 0 or not marks or source.up(marks[0]) != "WHEN":
        return None
    branches: list[tuple[int, int]] = []  # (WHEN, THEN)
    otherwise = None
    k = 0
    while k < len(marks):
        word = source.up(marks[k])
        if word == "WHEN" and k + 1 < len(marks) and source.up(marks[k + 1]) == "THEN":
            branches.append((marks[k], marks[k + 1]))
            k += 2
        elif word == "ELSE" and k == len(marks) - 1:
            otherwise = marks[k]
            k += 1
        else:
            return None
    ends = [when for when, _ in branches[1:]] + [otherwise if otherwise is not None else block.end]

    def result(n: int) -> str:
        return _value(source, branches[n][1] + 1, ends[n] - 1)

    def default() -> str:
        return _value(source, otherwise + 1, block.end - 1) if otherwise is not None else "NULL"

    if marks[0] != block.opener + 1:  # CASE <subject> WHEN <value> ...
        subject = source.literal(block.opener + 1, marks[0] - 1)
        if subject is None:
            return None
        for n, (when, then) in enumerate(branches):
            value = source.literal(when + 1, then - 1)
            if value is None:
                return None
            equal = source._equal(subject, value)
            if equal is None:
                return None
            if equal is True:
                return block.opener, block.end, result(n)
        return block.opener, block.end, default()
    kept: list[tuple[int, str]] = []
    changed = False

    def rebuilt(tail: str) -> str:
        # Each piece keeps the space before it, so what follows a removed branch keeps its own.
        head = source.text[source.toks[block.opener].start : source.toks[marks[0] - 1].end]
        body = "".join(_case_branch(source, branches[m], ends[m], text) for m, text in kept)
        return head + body + tail + source.text[source.toks[block.end - 1].end : source.toks[block.end].end]

    for n, (when, then) in enumerate(branches):
        try:
            text, const = source.fold(source.condition(when + 1, then - 1))
        except _Unknown:
            text, const = source.span(when + 1, then - 1), None
        if const is None:
            changed |= text != source.span(when + 1, then - 1)
            kept.append((n, text))
            continue
        changed = True
        if _truth(const):
            if not kept:
                return block.opener, block.end, result(n)
            space = source.text[source.toks[when - 1].end : source.toks[when].start]
            return block.opener, block.end, rebuilt(f"{space}ELSE {result(n)}")
    if not changed:
        return None
    if not kept:
        return block.opener, block.end, default()
    otherwise_text = (
        source.text[source.toks[otherwise - 1].end : source.toks[block.end - 1].end]
        if otherwise is not None
        else ""
    )
    return block.opener, block.end, rebuilt(otherwise_text)


def _case_branch(source: _Source, branch: tuple[int, int], end: int, condition: str) -> str:
    when, then = branch
    return (
        source.text[source.toks[when - 1].end : source.toks[when + 1].start]
        + condition
        + source.text[source.toks[then - 1].end : source.toks[end - 1].end]
    )


def _fold_if_statement(source: _Source, block: _Block) -> tuple[int, int, str] | None:
    if block.end < 0 or block.semicolon < 0:
        return None
    marks = block.marks
    keywords = [block.opener] + [m for m in marks if source.up(m) == "ELSEIF"]
    thens = [m for m in marks if source.up(m) == "THEN"]
    elses = [m for m in marks if source.up(m) == "ELSE"]
    if len(thens) != len(keywords) or len(elses) > 1:
        return None
    otherwise = elses[0] if elses else None
    bounds = [*keywords[1:], otherwise if otherwise is not None else block.end]
    kept: list[tuple[int, str]] = []
    changed = False
    for n, keyword in enumerate(keywords):
        try:
            text, const = source.fold(source.condition(keyword + 1, thens[n] - 1))
        except _Unknown:
            text, const = source.span(keyword + 1, thens[n] - 1), None
        if const is None:
            changed |= text != source.span(keyword + 1, thens[n] - 1)
            kept.append((n, text))
            continue
        changed = True
        if _truth(const):
            if not kept:
                return _statements(source, block, thens[n], bounds[n])
            return _rebuild_if(source, block, keywords, thens, bounds, kept, (thens[n], bounds[n]))
    if not changed:
        return None
    if not kept:
        if otherwise is None:
            return _statements(source, block, None, None)
        return _statements(source, block, otherwise, block.end)
    tail = (otherwise, block.end) if otherwise is not None else None
    return _rebuild_if(source, block, keywords, thens, bounds, kept, tail)


def _rebuild_if(
    source: _Source,
    block: _Block,
    keywords: list[int],
    thens: list[int],
    bounds: list[int],
    kept: list[tuple[int, str]],
    otherwise: tuple[int, int] | None,
) -> tuple[int, int, str]:
    pieces = []
    for position, (n, text) in enumerate(kept):
        keyword = "IF" if position == 0 else "ELSEIF"
        pieces.append(
            keyword
            + source.text[source.toks[keywords[n]].end : source.toks[keywords[n] + 1].start]
            + text
            + source.text[source.toks[thens[n] - 1].end : source.toks[bounds[n]].start]
        )
    if otherwise is not None:
        after, until = otherwise
        pieces.append("ELSE" + source.text[source.toks[after].end : source.toks[until].start])
    pieces.append(source.text[source.toks[block.end].start : source.toks[block.semicolon].end])
    return block.opener, block.semicolon, "".join(pieces)


def _statements(source: _Source, block: _Block, after: int | None, until: int | None) -> tuple[int, int, str]:
    """The statement IF replaced by the statements between `after` and `until` (none: removed), put
    where the IF was and as far in."""
    if after is None or until is None or after + 1 == until:
        return block.opener, block.semicolon, ""
    start = source.toks[block.opener].start
    column = start - (source.text.rfind("\n", 0, start) + 1)
    body = source.text[source.toks[after].end : source.toks[until].start].rstrip()
    lead = body[: len(body) - len(body.lstrip())]
    if "\n" in lead:
        lines = body[lead.rindex("\n") + 1 :].split("\n")
        indented = lines
    else:
        lines = body.lstrip().split("\n")
        indented = lines[1:]
    margin = min((len(line) - len(line.lstrip()) for line in indented if line.strip()), default=0)
    first = lines[0][margin:] if indented is lines else lines[0]
    rest = [" " * column + line[margin:] if line.strip() else "" for line in lines[1:]]
    return block.opener, block.semicolon, "\n".join([first, *rest])


def _fold_where(source: _Source, i: int) -> tuple[int, int, str] | None:
    last, j = None, i + 1
    while j < len(source.toks):
        tok = source.toks[j]
        if (
            tok.text in (";", ")")
            or (tok.kind == "word" and tok.up in _WHERE_END)
            or tok.up in ("THEN", "END")
        ):
            break
        j = source.skip(j)
        last = j - 1
    if last is None:
        return None
    try:
        text, const = source.fold(source.condition(i + 1, last))
    except _Unknown:
        return None
    if const is not None:
        text = "TRUE" if const is True else "FALSE"
    if text == source.span(i + 1, last):
        return None
    return i + 1, last, text


def _fold_set_list(source: _Source, i: int) -> tuple[int, int, str] | None:
    j = i + 1
    while j < len(source.toks) and source.up(j) not in ("SET", ";"):
        j = source.skip(j)
    if source.up(j) != "SET":
        return None
    first, k = j + 1, j + 1
    while k < len(source.toks) and source.up(k) not in ("WHERE", ";", "ORDER", "LIMIT"):
        k = source.skip(k)
    items = source.commas(first, k - 1)
    if len(items) < 2:
        return None
    for n, (a, b) in enumerate(items):
        equals = next((e for e in range(a, b + 1) if source.toks[e].text == "="), None)
        if equals is None:
            continue
        left = [source.toks[e].up for e in range(a, equals)]
        right = [source.toks[e].up for e in range(equals + 1, b + 1)]
        if left != right:
            continue
        if n + 1 < len(items):
            return a, items[n + 1][0] - 1, ""  # this item and its comma, up to the next one
        return items[n - 1][1] + 1, b, ""  # the comma before the last item, and the item
    return None


def _fold_once(text: str) -> str | None:
    source = _Source(text)
    candidates: list[tuple[int, str]] = []
    for i, tok in enumerate(source.toks):
        if tok.kind != "word" or source.up(i - 1) == ".":
            continue
        word = tok.up
        block = source.block_at.get(i)
        if block is not None and block.kind in ("case", "if"):
            candidates.append((i, block.kind))
        elif word in ("IF", "COALESCE", *_NULL_IN_NULL_OUT) and source.up(i + 1) == "(":
            candidates.append((i, "call"))
        elif word == "WHERE":
            candidates.append((i, "where"))
        elif word == "UPDATE" and source.up(i - 1) not in ("FOR", "KEY"):
            candidates.append((i, "update"))
    for i, kind in candidates:
        if kind == "call":
            found = _fold_call(source, i)
        elif kind == "case":
            found = _fold_case(source, source.block_at[i])
        elif kind == "if":
            found = _fold_if_statement(source, source.block_at[i])
        elif kind == "where":
            found = _fold_where(source, i)
        else:
            found = _fold_set_list(source, i)
        if found is None:
            continue
        first, last, replacement = found
        start, end = source.toks[first].start, source.toks[last].end
        if kind == "update" and source.toks[last].text == ",":
            end = source.toks[last + 1].start  # an item and its comma: the next item takes its place
        if replacement == "" and kind in ("if", "update"):
            # A statement or an item removed whole: its line goes with it when nothing else is on it.
            line_start = text.rfind("\n", 0, start) + 1
            line_end = text.find("\n", end)
            line_end = len(text) if line_end < 0 else line_end
            if not text[line_start:start].strip() and not text[end:line_end].strip():
                start, end = line_start, min(line_end + 1, len(text))
        return text[:start] + replacement + text[end:]
    return None


def fold(text: str) -> str:
    """`text` (a procedure) with every constant expression this module knows folded."""
    for _ in range(10_000):
        folded = _fold_once(text)
        if folded is None:
            return text
        text = folded
    raise RuntimeError("folding does not end")
