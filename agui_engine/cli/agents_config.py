"""``agui-engine serve --config FILE``: several agents in one gateway, from a TOML file.

The file has one table per agent under ``agents``; the table's name is the agent's id::

    [agents.weather]
    agent = "embedded"           # as --agent (default: embedded)
    path = "/weather"            # default: /<id>
    description = "Weather"      # listed by /info
    a2ui = true                  # as --a2ui (the embedded agent only); ui_spec = true as --ui-spec
    a2ui_snapshots = "auto"      # as --a2ui-snapshots: true, false or "auto" (default)
    mcp = ["http://127.0.0.1:9000/mcp"]          # as --mcp (repeatable there)
    mcp_header_env = ["Authorization=MCP_TOKEN"] # as --mcp-header-env
    principals = ["alice"]       # only these principals of --auth-tokens-file may use it

    [agents.research]
    agent = "langgraph:examples.langgraph_graph:graph"

Every mistake is one line naming the file, the table and the key (``agents.toml: [agents.weather]
key 'spce': unknown; the keys are ...``), raised as UsageError before anything starts.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from agui_engine.genui.a2ui_clients import A2UISnapshots
from agui_engine.protocol.errors import UsageError
from agui_engine.transports.agents_app import AGENT_ID_PATTERN

from .tokens import read_small_file

__all__ = ["AGENT_KEYS", "AgentConfig", "MAX_CONFIG_BYTES", "parse_agents_config", "read_agents_config"]

#: The largest config file read (a config is a few hundred bytes; this only stops a wrong file).
MAX_CONFIG_BYTES: Final = 1024 * 1024


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One ``[agents.<id>]`` table (see the module docstring)."""

    id: str
    agent: str = "embedded"
    path: str | None = None
    description: str = ""
    a2ui: bool = False
    a2ui_snapshots: A2UISnapshots = "auto"
    ui_spec: bool = False
    mcp: tuple[str, ...] = ()
    mcp_header_env: tuple[str, ...] = ()
    principals: tuple[str, ...] | None = None


#: The keys an agent's table may have, and the type each takes.
AGENT_KEYS: Final[Mapping[str, type]] = {
    "a2ui": bool, "a2ui_snapshots": object, "agent": str, "description": str, "mcp": list, "mcp_header_env": list, "path": str, "principals": list,
    "ui_spec": bool,
}
_TYPE_NAMES: Final = {bool: "true or false", str: "a string", list: "a list of strings"}


def _agent(where: str, agent_id: str, table: Any) -> AgentConfig:
    at = f"{where}: [agents.{agent_id}]"
    if not AGENT_ID_PATTERN.fullmatch(agent_id):
        raise UsageError(f"{at}: the id must be letters, digits, '_', '-' or '.' (it is a URL path segment)")
    if not isinstance(table, dict):
        raise UsageError(f"{at}: must be a table (write [agents.{agent_id}] and its keys below it)")
    values: dict[str, Any] = {}
    for key, value in table.items():
        kind: type | None = AGENT_KEYS.get(key)
        if kind is None:
            raise UsageError(f"{at} key {key!r}: unknown; the keys are {', '.join(sorted(AGENT_KEYS))}")
        if key == "a2ui_snapshots":
            if value is not True and value is not False and value != "auto":
                raise UsageError(f"{at} key {key!r}: must be true, false or \"auto\"")
            values[key] = value
        elif isinstance(value, list):
            if kind is not list or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{at} key {key!r}: must be {_TYPE_NAMES[kind]}")
            values[key] = tuple(value)
        elif isinstance(value, kind):
            values[key] = value
        else:
            raise UsageError(f"{at} key {key!r}: must be {_TYPE_NAMES[kind]}")
    config = AgentConfig(id=agent_id, **values)
    if "a2ui_snapshots" in values and not config.a2ui:
        raise UsageError(f"{at} key 'a2ui_snapshots': changes how a2ui's surfaces stream: add a2ui = true")
    if (config.a2ui or config.ui_spec) and config.agent.strip() not in ("", "embedded"):
        flag = "a2ui" if config.a2ui else "ui_spec"
        raise UsageError(f"{at} key {flag!r}: offered to the embedded agent only; drop it or write agent = \"embedded\"")
    if config.path is not None and not config.path.startswith("/"):
        raise UsageError(f"{at} key 'path': must start with '/', got {config.path!r}")
    return config


def parse_agents_config(text: str, where: str) -> list[AgentConfig]:
    """The agents of a config file's ``text`` (``where``: its name, for the errors); UsageError
    (one line: file, table, key) for anything else."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{where}: not valid TOML: {exc}") from None
    extra = sorted(set(doc) - {"agents"})
    if extra:
        raise UsageError(f"{where}: unknown top-level key {extra[0]!r}; put each agent in an [agents.<id>] table")
    agents = doc.get("agents")
    if not isinstance(agents, dict) or not agents:
        raise UsageError(f"{where}: no agents; add a table per agent, e.g. [agents.weather] with agent = \"embedded\"")
    configs = [_agent(where, agent_id, table) for agent_id, table in agents.items()]
    paths: dict[str, str] = {}
    for config in configs:
        path = (config.path or "/" + config.id).rstrip("/")
        if path in paths:
            raise UsageError(f"{where}: [agents.{paths[path]}] and [agents.{config.id}] are both at {path}: "
                             "give each its own path")
        paths[path] = config.id
    return configs


def read_agents_config(path: str) -> list[AgentConfig]:
    """The agents of the config file at ``path``; UsageError (one line) when it cannot be read
    or is not a valid config."""
    text = read_small_file(path, MAX_CONFIG_BYTES, f"config file {path!r}")
    return parse_agents_config(text, path)
