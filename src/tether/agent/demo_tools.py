"""The demo tools behind ``tether chat --tools`` and ``tether serve --tools demo``: the current
time and a safe calculator.

The calculator parses the expression with ``ast`` and evaluates only numbers, + - * / // % **,
unary signs, parentheses and a few math functions — never ``eval``, never names or attributes —
with bounds on length, exponents and result size so a model cannot make it do unbounded work.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["DEMO_TOOLS", "CalculatorError", "calculate", "calculator", "current_time"]

MAX_EXPRESSION = 200
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 10**100


class CalculatorError(ValueError):
    """The expression is not plain arithmetic, or it is too big to evaluate."""


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: operator.mod,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _check(value: object) -> float:
    if type(value) not in (int, float):
        raise CalculatorError("result is not a real number")
    assert isinstance(value, int | float)
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise CalculatorError("result too large")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not a finite number")
    return value


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return _check(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _eval(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT or (abs(left) > 1 and abs(right) * math.log10(abs(left)) > 100):
                raise CalculatorError("exponent too large")
            return _check(left**right)
        function = _BINARY.get(type(node.op))
        if function is None:
            raise CalculatorError(f"operator {type(node.op).__name__} is not allowed")
        try:
            return _check(function(left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        function = _FUNCTIONS.get(node.func.id)
        if function is None:
            raise CalculatorError(f"unknown function {node.func.id!r}; known: {', '.join(_FUNCTIONS)}")
        try:
            return _check(function(*(_eval(arg) for arg in node.args)))
        except (TypeError, ValueError) as exc:
            raise CalculatorError(f"{node.func.id}: {exc}") from None
    raise CalculatorError(f"only arithmetic is allowed, not {type(node).__name__}")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression safely; ``CalculatorError`` explains what is refused."""
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(f"expression longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    return _eval(tree)


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as ``(17 * 3) / 4`` or ``sqrt(2) ** 2``.

    Args:
        expression: numbers, + - * / // % ** (or ^), parentheses, pi, e and the functions
            sqrt, abs, round, floor, ceil, log, sin, cos, tan.
    """
    value = calculate(expression)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)


def current_time(timezone_name: str = "UTC") -> str:
    """The current date and time in ISO 8601 format.

    Args:
        timezone_name: an IANA time zone such as ``Europe/Paris``; UTC by default.
    """
    try:
        zone = UTC if timezone_name.upper() == "UTC" else ZoneInfo(timezone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {timezone_name!r}") from None
    return datetime.now(zone).isoformat(timespec="seconds")


DEMO_TOOLS: tuple[Callable[..., str], ...] = (current_time, calculator)
"""What ``--tools`` adds to the chat agent."""
