"""agui-engine serve's options that are not exercised end to end elsewhere."""

from __future__ import annotations

import argparse

from agui_engine.cli.serve import add_arguments


def test_access_log_is_on_by_default_and_can_be_turned_off() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).access_log is True
    assert parser.parse_args(["--no-access-log"]).access_log is False
    assert parser.parse_args(["--access-log"]).access_log is True
    assert "--no-access-log" in parser.format_help()
