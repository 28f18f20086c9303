"""Tools: schema from signature + docstring; every bad call becomes a message, never a raise."""

from __future__ import annotations

from typing import Literal

import pytest

from rankgym.envs.tools import Tool, ToolBox, parse_docstring, tool


def convert(value: float, unit: Literal["km", "mi"] = "km", tags: list[str] | None = None) -> float:
    """Convert a distance.

    More detail that is not the summary.

    Args:
        value: The distance
            to convert (continued line).
        unit (str): Target unit.
        tags: Optional labels.

    Returns:
        The converted value.
    """
    return value * (1.0 if unit == "km" else 0.621371)


def boom(x: int) -> int:
    """Always fails."""
    raise ZeroDivisionError("no luck")


def test_schema_from_signature_and_google_docstring():
    schema = Tool.from_function(convert).schema()
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "convert"
    assert fn["description"].startswith("Convert a distance.")
    assert "Returns" not in fn["description"]
    params = fn["parameters"]
    assert params["type"] == "object" and params["required"] == ["value"]
    assert params["properties"]["value"]["type"] == "number"
    assert (
        params["properties"]["value"]["description"] == "The distance to convert (continued line)."
    )
    assert params["properties"]["unit"]["enum"] == ["km", "mi"]
    assert params["properties"]["unit"]["default"] == "km"
    assert params["properties"]["tags"]["description"] == "Optional labels."
    assert "title" not in params and "title" not in params["properties"]["value"]


def test_arguments_are_coerced_and_validated():
    t = Tool.from_function(convert)
    ok = t.call('{"value": "10", "unit": "mi"}')
    assert ok.ok and ok.arguments == {"value": 10.0, "unit": "mi", "tags": None}
    assert ok.content == str(10 * 0.621371)
    assert t.call({"value": 3}).value == 3.0


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("{}", "value: Field required"),
        ('{"value": 1, "speed": 2}', "speed: Extra inputs are not permitted"),
        ('{"value": "ten"}', "value:"),
        ('{"value": 1, "unit": "parsec"}', "unit:"),
    ],
)
def test_bad_arguments_become_error_messages(arguments, fragment):
    result = Tool.from_function(convert).call(arguments)
    assert not result.ok and result.arguments is None
    assert result.content.startswith("Error: invalid arguments for convert:")
    assert fragment in result.content
    assert "(parameters: value, unit, tags)" in result.content


def test_a_raising_tool_becomes_an_error_message():
    result = Tool.from_function(boom).call({"x": 1})
    assert not result.ok
    assert result.content == "Error: boom failed: ZeroDivisionError: no luck"


def test_toolbox_unknown_and_malformed_calls():
    box = ToolBox([convert, boom])
    assert [s["function"]["name"] for s in box.schemas()] == ["convert", "boom"]
    unknown = box.call({"function": {"name": "rm_rf", "arguments": "{}"}})
    assert not unknown.ok and "unknown tool 'rm_rf'" in unknown.content
    assert "convert, boom" in unknown.content
    for bad in (None, "x", {}, {"function": "convert"}, {"function": {"arguments": "{}"}}):
        assert not box.call(bad).ok
    with pytest.raises(ValueError, match="two tools"):
        ToolBox([convert, convert])


def test_tool_decorator_name_and_terminal_and_methods():
    class Holder:
        def __init__(self):
            self.seen = []

        @tool(name="submit", terminal=True)
        def answer(self, text: str) -> str:
            """Submit the answer.

            Args:
                text: The answer.
            """
            self.seen.append(text)
            return "ok"

    h = Holder()
    t = Tool.from_function(h.answer)
    assert t.name == "submit" and t.terminal
    assert "self" not in t.parameters["properties"]
    res = t.call({"text": 42})  # numbers are accepted for str parameters
    assert res.ok and res.terminal and res.arguments == {"text": "42"} and h.seen == ["42"]


def test_unsupported_signatures_and_long_output():
    def star(*args: int) -> int:
        return 0

    with pytest.raises(TypeError, match=r"\*args"):
        Tool.from_function(star)

    def big() -> str:
        return "x" * 20000

    out = Tool.from_function(big).call(None)
    assert out.ok and len(out.content) < 8100 and out.content.endswith("characters cut]")


def test_parse_docstring_without_args_section():
    assert parse_docstring("Just a summary.") == ("Just a summary.", {})
    assert parse_docstring("") == ("", {})
