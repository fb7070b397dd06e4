"""The scripted models: no network, no API key. :mod:`~agui_engine.demo.weather_model` is the
weather model ``agui-engine demo`` and ``serve --agent embedded`` answer with;
:mod:`~agui_engine.demo.scripted` is :class:`~agui_engine.demo.scripted.ScriptedModel`, a model
that answers from a script of turns you write (the examples' and tests' offline model).

Built on the loops' contracts like any model; nothing else in the core imports them.
``__all__`` lists the modules; each keeps its names in its own ``__all__``.
"""

__all__ = ["booking", "scripted", "weather_model"]
