from django.core.asgi import get_asgi_application

from gpufleet.profile import require_settings_module

require_settings_module("gpufleet.asgi")  # never the demo profile by default (profile.py says why)
application = get_asgi_application()
