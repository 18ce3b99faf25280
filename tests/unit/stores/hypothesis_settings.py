"""Settings of the store property tests: at least 150 examples, more when the active profile asks.

The hypothesis profile itself is chosen by the root ``tests/conftest.py`` (``HYPOTHESIS_PROFILE``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

PROPERTY = settings(max_examples=max(150, settings().max_examples), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
