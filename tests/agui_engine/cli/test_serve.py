"""agui-engine serve's options that are not exercised end to end elsewhere."""

from __future__ import annotations

import argparse

import pytest

from agui_engine.cli.serve import add_arguments


def test_access_log_is_on_by_default_and_can_be_turned_off() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).access_log is True
    assert parser.parse_args(["--no-access-log"]).access_log is False
    assert parser.parse_args(["--access-log"]).access_log is True
    assert "--no-access-log" in parser.format_help()


def test_history_is_kept_unless_no_history() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).no_history is False
    assert parser.parse_args(["--no-history"]).no_history is True
    assert "--no-history" in parser.format_help()


def test_ui_spec_is_for_the_embedded_agent_only(capsys: pytest.CaptureFixture[str]) -> None:
    from agui_engine.cli import main

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).ui_spec is False and "--ui-spec" in parser.format_help()
    assert main(["serve", "--ui-spec", "--agent", "http://127.0.0.1:9/"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ui-spec offers render_ui to the embedded agent" in err[0]
