"""Hypothesis profiles: how many examples a property test runs.

``ci`` (selected when ``CI=true``): the counts the suite has always run in CI, 200 examples a
property. ``dev`` (the default anywhere else): 25, so that a property finishes in a blink while
one works; ``HYPOTHESIS_PROFILE=ci`` runs the CI counts locally. ``tests/conftest.py`` loads the
profile before any test module is imported, so a ``@settings`` decorator reads it.

A property's count comes from the profile; a property states its own only when it needs a
different one, through these helpers (the reason beside it):

* :func:`at_most` -- each example is costly (a real server, a subprocess): never more than ``n``;
* :func:`scaled` -- the property needs more than the profile (a large space of rare cases).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["CI_EXAMPLES", "DEV_EXAMPLES", "at_most", "load_profile", "scaled"]

#: Examples a property runs in CI.
CI_EXAMPLES = 200
#: Examples a property runs locally (the ``dev`` profile).
DEV_EXAMPLES = 25


def load_profile() -> str:
    """Register ``ci`` and ``dev`` and load one: ``HYPOTHESIS_PROFILE`` if set, else ``ci`` when
    ``CI=true``, else ``dev``. Returns its name. No deadline in either: the suite runs on loaded
    machines, where a per-example time limit fails tests that are correct."""
    settings.register_profile("ci", max_examples=CI_EXAMPLES, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("dev", max_examples=DEV_EXAMPLES, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
    settings.load_profile(name)
    return name


def at_most(n: int) -> int:
    """``max_examples`` of a property whose examples are costly: the profile's count, but no more than ``n``."""
    return min(n, settings.default.max_examples)


def scaled(factor: float) -> int:
    """``max_examples`` of a property that needs ``factor`` times the profile's count."""
    return max(1, round(factor * settings.default.max_examples))
