"""Derived columns: a public formula of other columns, computed after decoding (never
modelled, never measured: post-processing). A formula is parsed into a small expression
tree and checked before any data is read; only arithmetic, numbers, column names and a
few numpy functions are allowed, so a spec cannot run code. Its size is bounded too, so
that what passes the check also evaluates (after the noise is drawn) without running out
of stack or of float range: at most ``MAX_TEXT`` characters, ``MAX_NODES`` expression
nodes nested at most ``MAX_DEPTH`` deep, each number a finite float.

>>> Formula.parse("age ** 2").evaluate({"age": np.array([3.0, 4.0])})
array([ 9., 16.])
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["FUNCTIONS", "MAX_DEPTH", "MAX_NODES", "MAX_TEXT", "Formula", "FormulaError"]

MAX_TEXT = 1_000
"""Characters of a formula: ample for arithmetic of a few columns."""
MAX_NODES = 256
"""Expression nodes (numbers, names, operations, calls) of a formula."""
MAX_DEPTH = 64
"""Nesting of a formula's expression tree, e.g. a sum of 63 columns (parsed left-deep). Its
evaluation recurses this deep, far within Python's 1,000 frames."""

FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "log": np.log,
    "log1p": np.log1p,
    "exp": np.exp,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
}
_BINARY: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type, Callable[[np.ndarray], np.ndarray]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class FormulaError(ValueError):
    """A formula uses something other than arithmetic, numbers, names and ``FUNCTIONS``."""


@dataclass(frozen=True)
class Formula:
    """A parsed formula: ``text`` and the column ``names`` it reads."""

    text: str
    tree: ast.expr
    names: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Formula:
        if len(text) > MAX_TEXT:
            raise FormulaError(f"formula ({text[:40]!r}...) must be at most {MAX_TEXT} characters")
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError as e:
            raise FormulaError(f"formula {text!r} is not an expression ({e.msg})") from None
        except (RecursionError, MemoryError, ValueError):  # the parser's own limits, a NUL byte
            raise FormulaError(
                f"formula {text!r} must be a plain expression, nested at most {MAX_DEPTH} deep"
            ) from None
        _check_size(text, tree)
        names: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS) or len(node.args) != 1:
                    raise FormulaError(
                        f"formula {text!r}: only {sorted(FUNCTIONS)} of one argument may be called"
                    )
                if node.keywords:
                    raise FormulaError(f"formula {text!r}: functions take no keyword arguments")
            elif isinstance(node, ast.Name):
                if node.id not in FUNCTIONS:
                    names.append(node.id)
            elif isinstance(node, ast.Constant):
                if not isinstance(node.value, int | float) or isinstance(node.value, bool):
                    raise FormulaError(f"formula {text!r}: constants must be numbers")
                if not _finite(node.value):
                    raise FormulaError(f"formula {text!r}: numbers must be finite floats (|x| < 1.8e308)")
            elif not isinstance(node, ast.BinOp | ast.UnaryOp | ast.Load | ast.operator | ast.unaryop):
                raise FormulaError(
                    f"formula {text!r}: only + - * / // % **, numbers, column names and "
                    f"{sorted(FUNCTIONS)} are allowed ({type(node).__name__} is not)"
                )
            if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
                raise FormulaError(f"formula {text!r}: operator {type(node.op).__name__} is not allowed")
            if isinstance(node, ast.UnaryOp) and type(node.op) not in _UNARY:
                raise FormulaError(f"formula {text!r}: operator {type(node.op).__name__} is not allowed")
        if not names:
            raise FormulaError(f"formula {text!r} must read at least one column")
        return cls(text, tree, tuple(dict.fromkeys(names)))

    def evaluate(self, columns: Mapping[str, np.ndarray]) -> np.ndarray:
        """The formula on float arrays (NaN in, NaN out)."""

        def ev(node: ast.expr) -> np.ndarray:
            if isinstance(node, ast.BinOp):
                return _BINARY[type(node.op)](ev(node.left), ev(node.right))
            if isinstance(node, ast.UnaryOp):
                return _UNARY[type(node.op)](ev(node.operand))
            if isinstance(node, ast.Call):
                assert isinstance(node.func, ast.Name)
                return FUNCTIONS[node.func.id](ev(node.args[0]))
            if isinstance(node, ast.Name):
                return np.asarray(columns[node.id], dtype=float)
            assert isinstance(node, ast.Constant) and isinstance(node.value, int | float)
            return np.asarray(float(node.value))

        with np.errstate(all="ignore"):
            return np.broadcast_to(ev(self.tree), (len(next(iter(columns.values()))),)).astype(float)


def _finite(x: int | float) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:  # an integer beyond the float range
        return False


def _check_size(text: str, tree: ast.expr) -> None:
    """At most ``MAX_NODES`` expression nodes, nested at most ``MAX_DEPTH`` deep (walked
    without recursion: the tree of a long formula can be deeper than Python's stack)."""
    stack, nodes = [(tree, 1)], 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_DEPTH or nodes > MAX_NODES:
            raise FormulaError(
                f"formula {text!r} must hold at most {MAX_NODES} numbers, names and operations, nested "
                f"at most {MAX_DEPTH} deep"
            )
        stack += [(child, depth + 1) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
