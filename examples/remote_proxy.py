"""A gateway in front of a remote AG-UI agent: ``serve --agent http://...`` proxies another server.

Run it from the repository root, in three terminals::

    agui-engine serve --port 8001 --agent py:examples.llm_agent:agent
    agui-engine serve --port 8000 --agent http://127.0.0.1:8001/
    agui-engine run --url http://127.0.0.1:8000/ "What's the weather in Paris?"

The second server's agent is an ``SSEAgent`` client of the first (``ws://`` would use the
WebSocket client, ``stdio:<command>`` a subprocess): every event of the remote run is read,
verified again and served with this gateway's own event ids, resume log, auth and
inspector (``http://127.0.0.1:8000/inspect``); a client that cancels here cancels the run
there. In a program of your own, ``agent`` below is the same proxy as an object
(``agui-engine serve --agent py:examples.remote_proxy:agent``): point ``AGUI_UPSTREAM_URL``
at the remote agent (default ``http://127.0.0.1:8001/``) and give it headers if it needs them.
"""

from __future__ import annotations

import os

from agui_engine.transports import SSEAgent

#: The remote agent this proxy forwards to.
UPSTREAM_URL = os.environ.get("AGUI_UPSTREAM_URL", "http://127.0.0.1:8001/")

agent = SSEAgent(UPSTREAM_URL)
