"""Root conftest of pytest-cudagraph's own test suite."""

import os

from hypothesis import HealthCheck, settings

# Compiles and captures are slow and their first call is slower still, so no
# deadline; a bounded number of examples keeps CI on two cores affordable.
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=15,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=200,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
