"""The production profile, unchanged, plus one route: the floor view (see urls.py).

benchmarks/api.py starts gunicorn with this module so that the floor is measured through exactly the
middleware, settings and server the API routes go through.
"""

from gpufleet.settings.production import *  # noqa: F403

ROOT_URLCONF = "benchmarks.apibench.urls"
