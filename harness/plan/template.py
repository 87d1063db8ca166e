"""Per-thread values in group options, for experiments where each thread differs (the ActiveMQ
paper's subscriber j filtering on ID #j, publishers sending IDs #1 to #n in turn).

- `{{ expr }}` in a selector, property value, correlation id, durable name or client id is
  evaluated for each thread: integer arithmetic (+ - * // % and parentheses) over `n`, the
  thread's number in its group from 1 (across processes), and `threads`, the group's thread
  count; `join(separator, format, first, last)` joins format % i for i from first to last.
  Example: `ID = '#{{n}}'`; `{{ join(' OR ', "ID = '#%d'", (n-1)*4+1, n*4) }}`.
- `{first..last}` in a property value (after the above) makes the property cycle through
  the values, one per message: `ID=#{1..10}` sends #1, #2 ... #10, #1 ...
"""

from __future__ import annotations

import ast
import operator
import re
from typing import Any

_TEMPLATE = re.compile(r"\{\{(.*?)\}\}")
_CYCLE = re.compile(r"\{(-?\d+)\.\.(-?\d+)\}")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
MAX_JOIN = 10_000


class TemplateError(ValueError):
    pass


def _join(separator: str, fmt: str, first: int, last: int) -> str:
    if last - first >= MAX_JOIN:
        raise TemplateError(f"join over {last - first + 1} values (at most {MAX_JOIN})")
    try:
        return separator.join(fmt % i for i in range(first, last + 1))
    except (TypeError, ValueError) as exc:  # "%d %s" wants two; "%=" is no conversion
        raise TemplateError(f"join format {fmt!r}: {exc}") from None


def _eval(node: ast.AST, names: dict[str, int]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, names)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | str):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise TemplateError(f"unknown name {node.id!r} (use n or threads)")
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _eval(node.left, names), _eval(node.right, names)
        if not (isinstance(left, int) and isinstance(right, int)):
            raise TemplateError("arithmetic needs whole numbers")
        if isinstance(node.op, ast.FloorDiv | ast.Mod) and right == 0:
            raise TemplateError("division by zero")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "join" and len(node.args) == 4 and not node.keywords:
        separator, fmt, first, last = (_eval(a, names) for a in node.args)
        if not (isinstance(separator, str) and isinstance(fmt, str) and
                isinstance(first, int) and isinstance(last, int)):
            raise TemplateError("join(separator, format, first, last) takes two strings and "
                                "two whole numbers")
        return _join(separator, fmt, first, last)
    raise TemplateError(f"{ast.unparse(node)!r} is not allowed (arithmetic on n and threads, "
                        "and join(), only)")


def expand(text: str, n: int, threads: int) -> str:
    """text with each {{ expr }} replaced by its value for thread number n (from 1)."""
    if "{{" not in text:
        return text

    def one(match: re.Match[str]) -> str:
        source = match.group(1).strip()
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError:
            raise TemplateError(f"{{{{ {source} }}}} is not an expression") from None
        return str(_eval(tree, {"n": n, "threads": threads}))

    return _TEMPLATE.sub(one, text)


def check(text: str) -> None:
    """Raise TemplateError if text's templates cannot be evaluated (tried for thread 1)."""
    expand(text, 1, 1)


def cycle(properties: dict[str, str], n: int, threads: int) -> list[dict[str, str]]:
    """The property sets a producer thread sends in turn: one set unless a value cycles."""
    expanded = {k: expand(v, n, threads) for k, v in properties.items()}
    columns: dict[str, list[str]] = {}
    for key, value in expanded.items():
        match = _CYCLE.search(value)
        if match:
            first, last = int(match.group(1)), int(match.group(2))
            step = 1 if last >= first else -1
            columns[key] = [value[:match.start()] + str(i) + value[match.end():]
                            for i in range(first, last + step, step)]
        else:
            columns[key] = [value]
    length = max((len(v) for v in columns.values()), default=1)
    return [{k: v[i % len(v)] for k, v in columns.items()} for i in range(length)]
