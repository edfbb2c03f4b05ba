"""Config files as data: JSON written back in its own style, TOML strings that hold any text."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teleclaude.adapters.agent_config import BrokenConfig, detect_style, dump_json, parse_json, toml_table
from teleclaude.agents import formats, gemini
from teleclaude.agents.formats import basic_string, multiline_string
from teleclaude.setup import install

STYLES = {
    "JSON.stringify(x, null, 2)": json.dumps({"a": [1, {"b": "é"}], "c": {}}, indent=2, ensure_ascii=False),
    "indent 4, final newline": json.dumps({"a": {"b": [True, None]}}, indent=4) + "\n",
    "tabs": json.dumps({"a": {"b": 1.5}}, indent="\t") + "\n",
    "one line": json.dumps({"a": 1, "b": [1, 2]}),
    "one line, compact": json.dumps({"a": 1, "b": [1, 2]}, separators=(",", ":")) + "\n",
    "escaped unicode": json.dumps({"name": "café"}, indent=2) + "\n",
    "CRLF": json.dumps({"a": {"b": 1}}, indent=2).replace("\n", "\r\n") + "\r\n",
}


@pytest.mark.parametrize("text", STYLES.values(), ids=STYLES.keys())
def test_json_is_written_back_in_the_style_it_was_found_in(text):
    data, style = parse_json(Path("x.json"), text.encode())
    assert dump_json(data, style) == text.encode()
    assert detect_style(dump_json(data, style).decode()) == style


@pytest.mark.parametrize("text", ['{"a": 1,}', "[1, 2]", "{'a': 1}", '{"a": 1} // comment'])
def test_json_that_is_not_an_object_is_a_broken_config(text):
    with pytest.raises(BrokenConfig):
        parse_json(Path("settings.json"), text.encode())


@given(st.text())
def test_a_multiline_toml_string_holds_any_text(text):
    assert tomllib.loads("prompt = " + multiline_string(text) + "\n")["prompt"] == text


@given(st.text())
def test_a_basic_toml_string_holds_any_text(text):
    assert tomllib.loads("description = " + basic_string(text))["description"] == text


@pytest.mark.parametrize(
    "text",
    [
        '"',
        '""',
        '"""',
        '""""""',
        'ends with a quote"',
        "back\\slash\\",
        "\\n not a newline",
        "a\r\nb\x00\x7f",
    ],
)
def test_quotes_and_backslashes_survive_a_multiline_toml_string(text):
    assert tomllib.loads("p = " + multiline_string(text))["p"] == text


def test_a_toml_table_quotes_keys_that_need_it():
    text = toml_table(("mcp_servers", "tele claude"), {"command": 'C:\\bin\\"t"', "args": ["mcp", "x y"]})
    assert tomllib.loads(text) == {
        "mcp_servers": {"tele claude": {"command": 'C:\\bin\\"t"', "args": ["mcp", "x y"]}}
    }


@pytest.mark.parametrize("name", install.command_names())
def test_each_gemini_command_parses_and_keeps_the_prompt(name):
    markdown = install.command_markdown(name)
    meta, body = formats.split_front_matter(markdown)
    parsed = tomllib.loads(gemini.command_toml("x", markdown))
    assert parsed["description"] == meta["description"]
    assert parsed["prompt"] == body.lstrip("\n").replace("$ARGUMENTS", "{{args}}")
    assert "{{args}}" in parsed["prompt"] or name == "next-bugs"


def test_a_gemini_prompt_with_hostile_text_round_trips():
    markdown = (
        '---\ndescription: a "quoted" \\ thing\nargument-hint: <slug>\n---\nRun """x""" \\d+ on $ARGUMENTS"'
    )
    parsed = tomllib.loads(gemini.command_toml("x", markdown))
    assert parsed == {"description": 'a "quoted" \\ thing', "prompt": 'Run """x""" \\d+ on {{args}}"'}
