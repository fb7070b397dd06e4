"""Generative UI: components as tools, their props streamed as JSON Patch
(:mod:`~agui_engine.genui.component_stream`), interactables, the generative UI spec tree
(:mod:`~agui_engine.genui.tree`) and its ``render_ui`` tool (:mod:`~agui_engine.genui.uispec`), A2UI
(:mod:`~agui_engine.genui.a2ui`; the form each client gets: :mod:`~agui_engine.genui.a2ui_clients`), MCP Apps (:mod:`~agui_engine.genui.mcp_apps`) and the server
resources bound components show (:mod:`~agui_engine.genui.resources`).

Above the protocol layer and the tokenizer (:mod:`agui_engine.jsonstream`); below the loops.
``__all__`` lists the modules; each keeps its names in its own ``__all__``.
"""

__all__ = [
    "a2ui",
    "a2ui_clients",
    "component_stream",
    "components",
    "interactables",
    "mcp_apps",
    "resources",
    "schemas",
    "tree",
    "uispec",
]
