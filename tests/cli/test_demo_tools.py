"""The demo tools: a calculator that evaluates arithmetic and refuses everything else."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether.agent.demo_tools import CalculatorError, calculate, calculator, current_time


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(17 * 3) / 4", 12.75),
        ("2 ** 10", 1024),
        ("2 ^ 10", 1024),
        ("-3 + +4", 1),
        ("7 // 2 + 7 % 2", 4),
        ("sqrt(16) + abs(-2)", 6),
        ("round(pi, 2)", 3.14),
    ],
)
def test_arithmetic(expression: str, expected: float) -> None:
    assert calculate(expression) == pytest.approx(expected)


def test_calculator_prints_integers_without_a_fraction() -> None:
    assert calculator("10 / 2") == "5"
    assert calculator("1 / 4") == "0.25"


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "x + 1",
        "(1).__class__",
        "[1, 2]",
        "'a' * 3",
        "lambda: 1",
        "1 if 1 else 2",
        "9 ** 9 ** 9",
        "10 ** 101",
        "1 / 0",
        "(-8) ** 0.5",
        "1e308 * 10",
        "sqrt(-1)",
        "1 +",
        "1" * 300,
        "True + 1",
    ],
)
def test_refuses_anything_but_bounded_arithmetic(expression: str) -> None:
    with pytest.raises(CalculatorError):
        calculate(expression)


@given(st.integers(-(10**6), 10**6), st.integers(-(10**6), 10**6))
def test_agrees_with_python_on_integer_arithmetic(a: int, b: int) -> None:
    assert calculate(f"{a} + {b} * 3 - ({a})") == a + b * 3 - a
    if b:
        assert calculate(f"({a}) // ({b})") == a // b
        assert calculate(f"({a}) / ({b})") == pytest.approx(a / b)


def test_current_time_is_now_in_the_given_zone() -> None:
    stamp = datetime.fromisoformat(current_time())
    assert stamp.utcoffset() == timedelta(0)
    assert abs(stamp - datetime.now(UTC)) < timedelta(minutes=5)
    tokyo = datetime.fromisoformat(current_time("Asia/Tokyo"))
    assert tokyo.utcoffset() == timedelta(hours=9)
    with pytest.raises(ValueError, match="unknown time zone"):
        current_time("Mars/Olympus")
    assert math.isfinite(stamp.timestamp())
