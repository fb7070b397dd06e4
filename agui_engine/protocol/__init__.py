"""The AG-UI protocol layer: the events and their codecs, the verifier, the writer, the accumulator,
the error tree, JSON pointers, the JSON Schemas of the events and the ``Agent`` contract.

The bottom layer of the core: it imports nothing else of the project. ``__all__`` lists the modules
(each keeps its names in its own ``__all__``); the names a user starts with are also in
:mod:`agui_engine`.
"""

__all__ = ["accumulator", "agent", "capabilities", "codec", "compact", "errors", "events", "ids", "pointer", "proto", "schema", "threads", "verify", "wire", "writer"]
