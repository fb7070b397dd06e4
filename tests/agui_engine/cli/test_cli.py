"""agui_engine.cli: the entry point imports only the subcommand that runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from agui_engine.cli import SUBCOMMANDS

#: What the top-level help must not load: the network libraries and every
#: subcommand, transport and adapter module.
HEAVY = ("aiohttp", "httpx", "websockets", "agui_engine.transports", "agui_engine.adapters", "agui_engine.cli.")
#: What every command shares (the --debug switch; standard library only): the top level loads it.
SHARED = "agui_engine.cli.options"
#: What no command's ``--help`` may load.
NETWORK_LIBRARIES = ("aiohttp", "httpx", "websockets")


#: Printed between the command's output and the module list.
MARK = "--- modules loaded ---"


def _loaded_after(argv: list[str]) -> list[str]:
    code = textwrap.dedent(
        f"""
        import sys
        from agui_engine.cli import main
        try:
            main({argv!r})
        except SystemExit:
            pass
        print("{MARK}")
        print(" ".join(sorted(sys.modules)))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.rpartition(MARK)[2].split()
    assert "agui_engine.cli" in loaded  # the probe itself works
    return loaded


def test_help_imports_no_network_library_and_no_subcommand() -> None:
    loaded = _loaded_after(["--help"])
    heavy = [m for m in loaded if (m.startswith(HEAVY) and m != SHARED) or m in NETWORK_LIBRARIES]
    assert heavy == []


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_a_subcommands_help_imports_its_own_module_only_and_no_network_library(command: str) -> None:
    loaded = _loaded_after([command, "--help"])
    others = [SUBCOMMANDS[name][0] for name in SUBCOMMANDS if name != command]
    assert SUBCOMMANDS[command][0] in loaded
    assert [m for m in others if m in loaded] == []
    assert [m for m in NETWORK_LIBRARIES if m in loaded] == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", "--url", "http://127.0.0.1:1/", "--capabilites"],
         "agui-engine: unrecognized arguments: --capabilites (did you mean --capabilities? see agui-engine run --help)"),
        (["serve", "--no-histroy"],
         "agui-engine: unrecognized arguments: --no-histroy (did you mean --no-history? see agui-engine serve --help)"),
        (["serve", "--zzz"], "agui-engine: unrecognized arguments: --zzz (see agui-engine serve --help)"),
        (["--verison"], "agui-engine: unrecognized arguments: --verison (did you mean --version? see agui-engine --help)"),
    ],
)
def test_a_mistyped_option_is_one_line_naming_the_closest_and_the_commands_help(argv: list[str], expected: str) -> None:
    done = subprocess.run([sys.executable, "-m", "agui_engine", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and done.stderr == expected + "\n", done.stderr
