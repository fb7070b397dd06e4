"""agui-engine: a streaming engine for the AG-UI event protocol.

The core package does no IO. See ``spec/`` for the protocol as implemented.
"""

from __future__ import annotations

from .agent import Agent
from .errors import (
    AguiEngineError,
    LimitExceededError,
    RemoteInputError,
    UpstreamError,
    UsageError,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AguiEngineError",
    "LimitExceededError",
    "RemoteInputError",
    "UpstreamError",
    "UsageError",
    "__version__",
]
