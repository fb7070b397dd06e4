"""agui-engine: a streaming engine for the AG-UI event protocol.

The core package does no IO. Everything public is re-exported here; the
submodules are the places to read:

* :mod:`~agui_engine.events` -- every AG-UI 1.0 event, message and input type.
* :mod:`~agui_engine.codec` -- JSON, SSE and NDJSON encoders and feed-style decoders.
* :mod:`~agui_engine.verify` -- the protocol verifier (one transition table).
* :mod:`~agui_engine.accumulator` -- events into messages, tool calls, state, components.
* :mod:`~agui_engine.jsonstream` -- the incremental JSON tokenizer: fragments to JSON Patch.
* :mod:`~agui_engine.components`, :mod:`~agui_engine.component_stream`,
  :mod:`~agui_engine.interactables`, :mod:`~agui_engine.genui` -- generative UI.
* :mod:`~agui_engine.llm`, :mod:`~agui_engine.decision`, :mod:`~agui_engine.llm_agent`,
  :mod:`~agui_engine.embedded` -- the model contract, the decision loop, the agent, the demo model.
* :mod:`~agui_engine.agent_loop` -- any inner agent's events, verified, repaired and component-aware.
* :mod:`~agui_engine.errors` -- the error tree.

See ``spec/`` for the protocol as implemented.
"""

from __future__ import annotations

from . import (
    accumulator,
    agent,
    agent_loop,
    codec,
    component_stream,  # importing it registers the tambo.component.* accumulator handlers
    components,
    decision,
    embedded,
    errors,
    events,
    genui,
    interactables,
    jsonstream,
    llm,
    llm_agent,
    prompts,
    verify,
)
from .accumulator import *  # noqa: F401,F403
from .agent import *  # noqa: F401,F403
from .agent_loop import *  # noqa: F401,F403
from .codec import *  # noqa: F401,F403
from .component_stream import *  # noqa: F401,F403
from .components import *  # noqa: F401,F403
from .decision import *  # noqa: F401,F403
from .embedded import *  # noqa: F401,F403
from .errors import *  # noqa: F401,F403
from .events import *  # noqa: F401,F403
from .genui import *  # noqa: F401,F403
from .interactables import *  # noqa: F401,F403
from .jsonstream import *  # noqa: F401,F403
from .llm import *  # noqa: F401,F403
from .llm_agent import *  # noqa: F401,F403
from .prompts import *  # noqa: F401,F403
from .verify import *  # noqa: F401,F403

__version__ = "0.1.0"

#: The modules whose public names make up the package's public API, in this order.
PUBLIC_MODULES = (
    errors,
    agent,
    events,
    codec,
    verify,
    accumulator,
    jsonstream,
    components,
    component_stream,
    interactables,
    genui,
    llm,
    prompts,
    decision,
    llm_agent,
    agent_loop,
    embedded,
)

__all__ = list(dict.fromkeys(name for module in PUBLIC_MODULES for name in module.__all__)) + ["__version__"]
