from django.core.wsgi import get_wsgi_application

from gpufleet.bodydeadline import deadline_for_bodies
from gpufleet.core import conf
from gpufleet.gcfreeze import settle_startup_objects
from gpufleet.profile import require_settings_module

require_settings_module("gpufleet.wsgi")  # never the demo profile by default (profile.py says why)
django_application = get_wsgi_application()
# A slow request body holds a gthread thread only until this deadline (bodydeadline.py says why).
application = deadline_for_bodies(django_application, conf.BODY_TIMEOUT_SECONDS)
# gunicorn imports this module in each worker (no --preload): the worker's startup objects are frozen out of
# the garbage collector's full passes before it serves anything (gcfreeze.py says why).
settle_startup_objects()
