"""Generative UI: components as tools, their props streamed as JSON Patch
(:mod:`~agui_engine.genui.component_stream`), interactables, the generative UI spec tree
(:mod:`~agui_engine.genui.tree`) and its ``render_ui`` tool (:mod:`~agui_engine.genui.uispec`), and the
server resources bound components show (:mod:`~agui_engine.genui.resources`).

Above the protocol layer and the tokenizer (:mod:`agui_engine.jsonstream`); below the loops. Public
names are re-exported from :mod:`agui_engine`.
"""
