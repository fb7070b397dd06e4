"""The decision-loop system prompt: one-pass template substitution and its sections."""

from __future__ import annotations

from agui_engine.prompts import (
    DECISION_LOOP_TEMPLATE,
    TEMPLATE_VARIABLES,
    build_system_prompt,
    render_template,
)


def test_render_is_one_pass_and_leaves_unknown_braces() -> None:
    template = 'a {x} b {y} c {"json": 1} d {unknown}'
    out = render_template(template, {"x": "{y}", "y": "{x}"})
    assert out == 'a {y} b {x} c {"json": 1} d {unknown}'


def test_every_placeholder_is_filled_and_template_json_survives() -> None:
    prompt = build_system_prompt()
    for name in TEMPLATE_VARIABLES:
        assert "{" + name + "}" in DECISION_LOOP_TEMPLATE
        assert "{" + name + "}" not in prompt
    assert '{"city": "Tokyo"}' in prompt
    assert "show_component_" in prompt and "_tambo_statusMessage" in prompt
    assert "<component_state>" in prompt and "update_component_props_" in prompt
    # empty inputs leave their sections out
    assert "# Memories" not in prompt and "# Additional instructions" not in prompt


def test_values_with_braces_are_not_templated() -> None:
    prompt = build_system_prompt(
        custom_instructions="Always answer in {language}; never expand {user_memories}.",
        memories=["likes {curly} things"],
        context=[("page", '{"route": "/weather/{city}"}')],
        component_names=["WeatherCard", "Dashboard"],
        interactables=[{"id": "Note-k3x", "componentName": "Note", "props": {"text": "{hi}"}, "isSelected": True}],
    )
    assert "Always answer in {language}; never expand {user_memories}." in prompt
    assert "- likes {curly} things" in prompt
    assert '{"route": "/weather/{city}"}' in prompt
    assert "Dashboard, WeatherCard" in prompt
    assert '"id": "Note-k3x"' in prompt and '"text": "{hi}"' in prompt
    # order: memories before custom instructions, both at the end
    assert prompt.index("# Memories") < prompt.index("# Additional instructions")
