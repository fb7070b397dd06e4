"""Runnable examples: each module's docstring gives the one command that serves it, offline
(run from the repository root). Not part of the installed package; ``tests/test_examples.py``
runs each as documented."""
