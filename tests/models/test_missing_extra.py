"""Optional SDKs: importing a driver without its extra raises ``MissingExtra`` naming the pip
command. Each case runs in a fresh interpreter where the SDK import is blocked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tether import MissingExtra, UserError
from tether.models._sdk import require

_PROBE = textwrap.dedent(
    """
    import sys
    sys.modules[{blocked!r}] = None  # the SDK is "not installed"
    try:
        import {module}
    except ImportError as exc:
        import tether
        assert isinstance(exc, tether.MissingExtra), type(exc)
        print(exc.extra, "|", exc)
    else:
        print("imported")
    """
)


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("tether.models.openai_chat", "openai", "openai"),
        ("tether.models.local", "llama_cpp", "local"),
    ],
)
def test_driver_without_its_sdk_names_the_pip_command(module: str, blocked: str, extra: str) -> None:
    code = _PROBE.format(module=module, blocked=blocked)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    name, _, message = out.partition(" | ")
    assert name == extra
    assert f"pip install 'tether[{extra}]'" in message
    assert repr(blocked) in message


def test_require_imports_or_raises_missing_extra() -> None:
    assert require("json", "x", "json support").dumps({}) == "{}"
    with pytest.raises(MissingExtra) as error:
        require("tether_no_such_sdk.sub", "nosuch", "the imaginary driver")
    assert isinstance(error.value, ImportError)
    assert isinstance(error.value, UserError)
    assert error.value.extra == "nosuch"
    assert "the imaginary driver" in str(error.value)
    assert "pip install 'tether[nosuch]'" in str(error.value)


def test_a_broken_sdk_is_not_reported_as_a_missing_extra() -> None:
    # the SDK is present but one of *its* dependencies is missing: re-raised unchanged
    code = textwrap.dedent(
        """
        import sys, types
        broken = types.ModuleType("fake_sdk")
        sys.modules["missing_dependency_of_sdk"] = None
        src = "import missing_dependency_of_sdk"
        import importlib.abc, importlib.util
        class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path, target=None):
                return importlib.util.spec_from_loader(name, self) if name == "fake_sdk" else None
            def create_module(self, spec):
                return None
            def exec_module(self, module):
                exec(src, module.__dict__)
        sys.meta_path.insert(0, Finder())
        from tether.models._sdk import require
        from tether import MissingExtra
        try:
            require("fake_sdk", "fake", "the fake driver")
        except MissingExtra:
            print("missing-extra")
        except ModuleNotFoundError as exc:
            print("reraised", exc.name)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "reraised missing_dependency_of_sdk"
