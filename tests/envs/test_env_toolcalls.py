"""The text tool-call protocol parser: lenient in what it reads, never raising."""

from __future__ import annotations

import json

import pytest

from rankgym.envs.toolcalls import has_tool_call_markup, parse_text, parse_tool_calls


def calls(text: str) -> list[tuple[str, dict]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in parse_tool_calls(text)
    ]


def test_documented_form_gives_openai_tool_calls():
    out = parse_tool_calls(
        'Let me compute. <tool_call>{"name": "add", "arguments": {"a": 7, "b": 9}}</tool_call>'
    )
    assert out == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 7, "b": 9}'},
        }
    ]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "add", "arguments": {"a": 7, "b": 9}}</tool_call>',
        '<tool_call>\n```json\n{"name": "add", "arguments": {"a": 7, "b": 9}}\n```\n</tool_call>',
        '<tool_call>{"name": "add", "arguments": {"a": 7, "b": 9}}',  # unclosed at the end
        "<tool_call>{'name': 'add', 'arguments': {'a': 7, 'b': 9}}</tool_call>",  # single quotes
        '<tool_call>{"name": "add", "arguments": {"a": 7, "b": 9,},}</tool_call>',  # trailing commas
        '<tool_call>{"name": "add", "arguments": "{\\"a\\": 7, \\"b\\": 9}"}</tool_call>',  # string args
        '<tool_call>{"function": {"name": "add", "arguments": {"a": 7, "b": 9}}}</tool_call>',
        '<tool_call>{"tool": "add", "parameters": {"a": 7, "b": 9}}</tool_call>',
        "<TOOL_CALL>add(a=7, b=9)</TOOL_CALL>",  # keyword call syntax, any tag case
        'Sure: {"name": "add", "arguments": {"a": 7, "b": 9}}',  # bare JSON object
        'I will call:\n```json\n{"name": "add", "arguments": {"a": 7, "b": 9}}\n```',
        '<tool_call>Calling {"name": "add", "arguments": {"a": 7, "b": 9}} now</tool_call>',
    ],
)
def test_lenient_variants_all_parse_to_the_same_call(text):
    assert calls(text) == [("add", {"a": 7, "b": 9})]


def test_several_calls_in_order_with_distinct_ids():
    text = (
        '<tool_call>{"name": "a", "arguments": {}}</tool_call> and '
        '<tool_call>[{"name": "b", "arguments": {"x": 1}}, {"name": "c"}]</tool_call>'
    )
    out = parse_tool_calls(text)
    assert [c["function"]["name"] for c in out] == ["a", "b", "c"]
    assert [c["id"] for c in out] == ["call_0", "call_1", "call_2"]
    assert json.loads(out[2]["function"]["arguments"]) == {}


def test_json_literals_inside_python_style_object():
    assert calls(
        "<tool_call>{'name': 'f', 'arguments': {'flag': true, 'x': null}}</tool_call>"
    ) == [("f", {"flag": True, "x": None})]


@pytest.mark.parametrize(
    "text",
    [
        "7 + 9 = 16",
        "The answer is {x} where x = 16.",
        '{"name": "Ana", "age": 3}',  # JSON with a name but no arguments: not a call
        'I\'d say {"answer": 16}',
        "",
        "<tool_call></tool_call>",
        '<tool_call>{"name": calculate</tool_call>',
        "<tool_call>__import__('os').system('echo pwned')</tool_call>",  # not a keyword call
        "<tool_call>f(1, 2)</tool_call>",  # positional args are not accepted
        '<tool_call>{"name": "f", "arguments": [1, 2]}</tool_call>',
        "{" * 500 + "}" * 499,
        "<tool_call>" + "[" * 2000 + "]" * 2000 + "</tool_call>",
    ],
)
def test_non_calls_and_garbage_give_no_call_and_never_raise(text):
    assert parse_tool_calls(text) == []


def test_unreadable_markup_is_reported_as_an_error():
    parsed = parse_text('Try: <tool_call>{"name": calculate</tool_call>')
    assert parsed.tool_calls == [] and len(parsed.errors) == 1
    assert "could not read" in parsed.errors[0]
    assert has_tool_call_markup("x <tool_call> y") and not has_tool_call_markup("no tags")


def test_content_keeps_the_prose_without_the_markup():
    parsed = parse_text('I will add. <tool_call>{"name": "add", "arguments": {}}</tool_call>')
    assert parsed.content == "I will add."
    parsed = parse_text('Ok {"name": "add", "arguments": {"a": 1}} done')
    assert parsed.content == "Ok  done"


# ---- hostile text (issue 16): never raises, linear time ------------------------------------

HOSTILE = {
    "unary minus x3000 (RecursionError before)": "<tool_call>calculate(expression="
    + "-" * 3000
    + "1)</tool_call>",
    "unary minus x100k (MemoryError before)": "<tool_call>calculate(expression="
    + "-" * 100_000
    + "1)</tool_call>",
    "list nested 300 deep in a keyword call": "<tool_call>f(x="
    + "[1," * 300
    + "]" * 300
    + ")</tool_call>",
    "a long + chain": "<tool_call>f(x=1" + "+1" * 100_000 + ")</tool_call>",
    "lists nested 990 deep": "<tool_call>" + "[" * 990 + "]" * 990 + "</tool_call>",
    "unclosed braces": "{" * 50_000,
    "unclosed quotes in an object": "{'" * 50_000,
    "opening tags only": "<tool_call>" * 20_000,
    "fences only": "```" * 30_000,
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_text_is_reported_as_unreadable_never_raised(text):
    parsed = parse_text(text)
    assert parsed.tool_calls == [] and isinstance(parsed.content, str)
    if "<tool_call>" in text:
        assert parsed.errors and all(len(e) < 200 for e in parsed.errors)


def test_keyword_call_with_negative_numbers_and_nested_lists_still_parses():
    assert calls("<tool_call>f(x=-1, y=[1, [2, {'a': -3}]])</tool_call>") == [
        ("f", {"x": -1, "y": [1, [2, {"a": -3}]]})
    ]


def test_arguments_nested_too_deeply_to_encode_are_an_error_not_a_call():
    deep = '{"name": "f", "arguments": ' + '{"a": ' * 900 + "1" + "}" * 900 + "}"
    parsed = parse_text(f"<tool_call>{deep}</tool_call>")
    assert len(parsed.tool_calls) + len(parsed.errors) == 1
    for c in parsed.tool_calls:  # if json could encode it, it is a well-formed call
        assert json.loads(c["function"]["arguments"])


def test_many_bare_calls_are_all_read_and_removed_from_the_content():
    text = "start " + '{"name": "a", "arguments": {}} ' * 5000 + "end"
    parsed = parse_text(text)
    assert len(parsed.tool_calls) == 5000
    assert parsed.tool_calls[-1]["id"] == "call_4999"
    assert parsed.content.split() == ["start", "end"]
