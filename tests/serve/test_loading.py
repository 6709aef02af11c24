"""``--model py:…`` names a model, or a factory of one: a class or a factory that cannot be
called with no arguments is a one-line ``UserError`` naming the spec, not a traceback at start."""

from __future__ import annotations

import pytest

from tether.errors import UserError
from tether.models.testing import FunctionModel
from tether.serve._loading import load_model


def broken_factory() -> FunctionModel:
    raise RuntimeError("no API key in the environment")


def test_a_model_class_needing_arguments_is_a_clear_error() -> None:
    with pytest.raises(UserError, match=r"FunctionModel'.*calling it with no arguments failed.*'fn'"):
        load_model("py:tether.models.testing:FunctionModel")


def test_a_factory_that_fails_is_a_clear_error() -> None:
    with pytest.raises(UserError, match=r"broken_factory'.*no API key"):
        load_model("py:tests.serve.test_loading:broken_factory")


def test_a_factory_returning_a_model_loads_it() -> None:
    model = load_model("py:tests.serve.scripted:fast_words")
    assert isinstance(model, FunctionModel)
