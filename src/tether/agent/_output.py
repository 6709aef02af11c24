"""Structured output: the model answers by calling the ``final_result`` tool whose parameters are
the output type's schema. ``str`` output is the final text answer."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import msgspec

from tether.messages import ToolCall
from tether.models import ToolDefinition

from ._schema import Validator, describe_validation_error
from ._tools import ArgumentsInvalid

__all__ = ["OUTPUT_TOOL", "OutputSpec"]

OUTPUT_TOOL = "final_result"
Output = TypeVar("Output")


class OutputSpec(Generic[Output]):
    """How a run's output is produced and validated."""

    __slots__ = ("definition", "is_text", "type", "validator", "wrapped")

    def __init__(self, output_type: type[Output]) -> None:
        self.type = output_type
        self.is_text = output_type is str
        self.definition: ToolDefinition | None = None
        self.wrapped = False
        if self.is_text:
            return
        try:
            validator = Validator(output_type)
            if validator.schema.get("type") != "object":
                validator = Validator(
                    msgspec.defstruct("final_result_arguments", [("response", output_type)], kw_only=True)
                )
                self.wrapped = True
        except TypeError as exc:
            raise TypeError(f"output_type {output_type!r} is not supported: {exc}") from None
        self.validator = validator
        self.definition = ToolDefinition(
            OUTPUT_TOOL,
            "Give the final answer. Call this exactly once, when the answer is complete.",
            validator.schema,
        )

    def parse(self, call: ToolCall) -> Output:
        """Validate a ``final_result`` call; ``ArgumentsInvalid`` carries the feedback."""
        if call.truncated:
            raise ArgumentsInvalid(
                "the final_result arguments are not a complete JSON object; call final_result "
                "again with a JSON object matching its schema"
            )
        try:
            value: Any = self.validator.validate_json(call.arguments)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise ArgumentsInvalid(
                f"the output failed validation: {describe_validation_error(exc)}. "
                "Call final_result again with corrected arguments."
            ) from None
        return value.response if self.wrapped else value
