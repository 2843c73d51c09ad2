from __future__ import annotations

import pytest

from gpufleet.audit.models import AppendOnlyError, AuditEvent
from tests.support import factories

pytestmark = pytest.mark.django_db


def test_audit_events_are_append_only():
    factories.tenant("acme")
    event = AuditEvent.objects.get()
    event.action = "forged"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.update(action="forged")
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get().action == "tenant.request"
