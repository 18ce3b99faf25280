"""Root test configuration: hypothesis profiles and the shared fixture plugins.

Hypothesis profiles: ``dev`` (default; 50 examples, no deadline) and ``ci`` (200 examples, no
deadline), selected when the environment has ``CI=true``. ``HYPOTHESIS_PROFILE`` overrides both.
"""

from __future__ import annotations

import os

from hypothesis import settings

pytest_plugins = ["tests.support.kafka_fixtures"]

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
)
