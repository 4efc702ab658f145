"""Derived columns: a public formula of other columns, computed after decoding (never
modelled, never measured: post-processing). A formula is parsed into a small expression
tree and checked before any data is read; only arithmetic, numbers, column names and a
few numpy functions are allowed, so a spec cannot run code.

>>> Formula.parse("age ** 2").evaluate({"age": np.array([3.0, 4.0])})
array([ 9., 16.])
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["FUNCTIONS", "Formula", "FormulaError"]

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
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError as e:
            raise FormulaError(f"formula {text!r} is not an expression ({e.msg})") from None
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
