"""The demo's scripted models: no network, no API key (:mod:`~agui_engine.demo.weather_model`, the
weather model ``agui-engine demo`` and ``serve --agent embedded`` answer with).

Built on the loops' contracts like any model; nothing else in the core imports it.
"""
