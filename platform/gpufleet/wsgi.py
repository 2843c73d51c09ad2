import os

from django.core.wsgi import get_wsgi_application

from gpufleet.gcfreeze import settle_startup_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpufleet.settings.demo")
application = get_wsgi_application()
# gunicorn imports this module in each worker (no --preload): the worker's startup objects are frozen out of
# the garbage collector's full passes before it serves anything (gcfreeze.py says why).
settle_startup_objects()
