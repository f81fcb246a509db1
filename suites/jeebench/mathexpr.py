"""LaTeX final answers as numbers: `\\frac{\\sqrt{3}}{2}` → 0.866. Only plain arithmetic is evaluated
(numbers, + - * / **, sqrt, pi) by walking the AST: no eval, bounded exponents."""

from __future__ import annotations

import ast
import math
import operator
import re

_UNIT_MACRO = re.compile(
    r"\\(?:mathrm|rm|operatorname|textrm)\s*\{(?:[^{}]|\{[^{}]*\})*\}(?:\s*\^\s*(?:\{[^{}]*\}|-?\d))?"
    r"|\^\s*\{?\s*\\circ\s*\}?|\\%|%"
)
_TEXT_MACRO = re.compile(r"\\(?:text|mathbf|textbf|mathit|bf)\s*\{([^{}]*)\}")
_SUB = re.compile(r"_\s*(?:\{[^{}]*\}|\\?\w)")


def latex_to_python(s: str) -> str:
    """LaTeX math → a Python arithmetic string (only what final answers use: frac, sqrt, times, powers)."""
    s = _UNIT_MACRO.sub(" unit ", s)
    s = _TEXT_MACRO.sub(r" \1 ", s)
    s = _SUB.sub(" ", s)
    s = (
        s.replace("\\left", "")
        .replace("\\right", "")
        .replace("\\!", "")
        .replace("\\,", " ")
        .replace("\\;", " ")
    )
    s = s.replace("\\%", "").replace("%", "").replace("−", "-")
    for _ in range(3):
        s = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", s)
        s = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", s)
        s = re.sub(r"\^\s*\{([^{}]*)\}", r"**(\1)", s)
    s = re.sub(r"\\sqrt\s*(\d)", r"sqrt(\1)", s)
    s = re.sub(r"\\(?:ln|log_?e?)\s*(\d+(?:\.\d+)?)", r"ln(\1)", s)  # "\ln 2" (natural log)
    s = re.sub(r"\\(?:ln|log_?e?)\s*\(", "ln(", s)
    s = re.sub(r"\^\s*(-?\d)", r"**\1", s)
    s = re.sub(r"\\(?:times|cdot)|×", "*", s)
    s = s.replace("\\pi", "pi").replace("{", "(").replace("}", ")").replace("$", " ")
    return s


_SAFE = re.compile(r"^[\d.\s+\-*/()]*(?:(?:sqrt|pi|ln)[\d.\s+\-*/()]*)*$")


_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


def _ast_value(node: ast.AST) -> float:
    """Floats only, names only sqrt/ln/pi, exponents bounded: a model's answer can never run away."""
    if isinstance(node, ast.Expression):
        return _ast_value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id == "pi":
        return math.pi
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _ast_value(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _ast_value(node.left), _ast_value(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 400:
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("sqrt", "ln")
        and len(node.args) == 1
    ):
        x = _ast_value(node.args[0])
        return math.sqrt(x) if node.func.id == "sqrt" else math.log(x)
    raise ValueError("not plain arithmetic")


_IMPLICIT = re.compile(r"(?:(?<=[\d.)])|(?<=pi))\s*(?=pi\b|sqrt\(|ln\(|\()|(?:(?<=pi)|(?<=\)))\s*(?=\d)")
"""Juxtaposition is a product in LaTeX math: `7 pi`, `2pi`, `3 sqrt(2)`, `2(1+x)`, `pi 2`, `(1)(2)`."""


def evaluate(expr: str) -> float | None:
    """Value of a plain arithmetic expression (numbers, + - * / **, sqrt, pi; juxtaposition multiplies),
    else None."""
    expr = expr.strip().rstrip(".,;")
    if not expr or not _SAFE.match(expr) or not re.search(r"\d", expr):
        return None
    expr = _IMPLICIT.sub("*", expr)
    try:
        v = _ast_value(ast.parse(expr, mode="eval"))
    except (ValueError, TypeError, ZeroDivisionError, OverflowError, SyntaxError, RecursionError):
        return None
    return v if isinstance(v, float) and math.isfinite(v) else None
