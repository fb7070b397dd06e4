"""Adapters: LLM providers over HTTP streaming and agent frameworks, translated
into the engine's types."""
