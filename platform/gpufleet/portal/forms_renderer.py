"""One form style for every portal form: `{{ form }}` renders each field as label, widget, its own errors
right under it, then help text, all tied together with ids (aria-describedby) for screen readers.

Set as FORM_RENDERER, so forms in other apps (quota requests, endpoints, billing) inherit it without
importing the portal.
"""

from __future__ import annotations

from django.forms.renderers import DjangoTemplates


class PortalFormRenderer(DjangoTemplates):
    form_template_name = "portal/forms/form.html"
    field_template_name = "portal/forms/field.html"
