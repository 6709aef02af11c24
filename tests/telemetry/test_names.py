"""Every convention name tether spells equals the constant of opentelemetry-semantic-conventions
(tether needs only the API at run time, so it cannot import that package)."""

from __future__ import annotations

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import db_attributes, error_attributes

from tether.telemetry import _names as n

SEMCONV = {
    **{k: v for k, v in vars(gen_ai).items() if k.startswith("GEN_AI_")},
    **{k: v for k, v in vars(gen_ai_metrics).items() if k.startswith("GEN_AI_")},
    **{k: v for k, v in vars(db_attributes).items() if k.startswith("DB_")},
    "ERROR_TYPE": error_attributes.ERROR_TYPE,
}

SPELLED_BY_TETHER = {k: v for k, v in vars(n).items() if k.isupper() and isinstance(v, str)}


def test_convention_names_match_the_semantic_conventions_package() -> None:
    ours = {k: v for k, v in SPELLED_BY_TETHER.items() if not v.startswith("tether.") and k in SEMCONV}
    assert len(ours) == 37
    for key, value in ours.items():
        assert SEMCONV[key] == value, key


def test_every_other_name_is_tethers_own_or_an_operation_value() -> None:
    others = {k: v for k, v in SPELLED_BY_TETHER.items() if k not in SEMCONV}
    operations = {v.value for v in gen_ai.GenAiOperationNameValues}  # pyright: ignore[reportDeprecated]
    for key, value in others.items():
        assert value.startswith("tether.") or value in operations or value == "_OTHER", (key, value)


def test_the_histogram_bucket_advice_is_the_conventions() -> None:
    assert n.TOKEN_BUCKETS[0] == 1
    assert n.TOKEN_BUCKETS[-1] == 67108864
    assert all(b == 4 * a for a, b in zip(n.TOKEN_BUCKETS, n.TOKEN_BUCKETS[1:], strict=False))
    assert all(
        abs(b - 2 * a) < 1e-9 for a, b in zip(n.DURATION_BUCKETS, n.DURATION_BUCKETS[1:], strict=False)
    )
