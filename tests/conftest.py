"""Shared fixtures. Hypothesis profiles: ``ci`` (default; derandomized when CI is set) and
``nightly`` (HYPOTHESIS_PROFILE=nightly: many more random examples)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT.parent / "shared" / "provider-samples"


@pytest.fixture(scope="session")
def provider_samples() -> Path:
    """The recorded provider traffic folder. Missing: skip visibly; in CI a missing folder fails."""
    if not SAMPLES.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"provider samples folder {SAMPLES} is missing (required in CI)")
        pytest.skip(f"provider samples folder {SAMPLES} is missing")
    return SAMPLES
