"""One form style everywhere: a label for every field, help text, each error next to the field it concerns
(announced with it), sensible defaults; slug errors name every rule broken."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from gpufleet import k8s_names
from tenants.slugs import slug_errors
from tests.support import factories

pytestmark = pytest.mark.django_db


def field_group(html: str, name: str) -> str:
    """The markup of one field's group (portal/forms/field.html)."""
    match = re.search(rf'<div class="field[^"]*"[^>]*data-field-group="{name}">(.*?)</div>', html, re.S)
    assert match, f"no field group {name}"
    return match.group(1)


@pytest.fixture
def owner_client(db):
    from scheduling.models import Flavor, GpuModel

    alice = factories.user("alice")
    factories.tenant("acme", "standard", owner=alice, phase="ready")
    model = GpuModel.objects.create(name="a100-80gb", dcgm_model_name="NVIDIA A100-SXM4-80GB", memory_mib=81920)
    Flavor.objects.create(name="a100", gpu_model=model, mode="whole", weight=1, capacity=8)
    client = Client()
    client.force_login(alice)
    return client


def test_speech_lab_gets_every_rule_it_breaks() -> None:
    problems = slug_errors("Speech Lab!")
    assert problems == [
        "must not contain whitespace or control characters",
        "must be lowercase",
        "must be a DNS-1123 label: only lowercase letters, digits and '-' (not '!')",
    ]
    assert slug_errors("-ab") == ["must start and end with a letter or digit"]
    assert "must be 3 to 40 characters long (got 2)" in slug_errors("A!")
    assert len(slug_errors("A!")) == 3
    assert k8s_names.dns1123_label("gp_u.x") == [
        "must be a DNS-1123 label: only lowercase letters, digits and '-' (not '.' '_')"]
    assert slug_errors("speech-lab") == []


def test_slug_errors_reach_the_page_next_to_the_slug_field(db) -> None:
    client = Client()
    client.force_login(factories.user("alice"))
    response = client.post("/tenants/new/", {"slug": "Speech Lab!", "trust_level": "standard"})
    assert response.status_code == 400
    group = html.unescape(field_group(response.content.decode(), "slug"))
    for rule in ("whitespace", "must be lowercase", "(not '!')"):
        assert rule in group, group
    assert 'aria-describedby="id_slug_errors id_slug_helptext"' in group and 'aria-invalid="true"' in group


def test_quota_request_error_sits_under_its_own_field_not_the_flavor(owner_client) -> None:
    response = owner_client.post("/gpu/tenants/acme/", {"propose": "1", "flavor": "a100", "nominal": "-1",
                                                        "reason": "training"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "must not be negative" in field_group(page, "nominal")
    assert "must not be negative" not in field_group(page, "flavor")
    # Labels and help text for every field, and a real textarea for the reason.
    assert '<label for="id_nominal">Guaranteed units (nominal quota)' in page
    assert 'id="id_borrowing_limit_helptext"' in page
    assert re.search(r'<textarea name="reason" cols="40" rows="4"', page)


def test_endpoint_tier_defaults_to_standard_and_tiers_go_critical_standard_batch(owner_client) -> None:
    page = owner_client.get("/gpu/tenants/acme/").content.decode()
    select = re.search(r'<select name="tier".*?</select>', page, re.S).group(0)
    assert re.findall(r'<option value="([a-z]+)"', select)[:3] == ["critical", "standard", "batch"]
    assert re.search(r'<option value="standard"[^>]*selected', select), select
    assert "scales to zero; pre-warmed before business hours" in select


def test_every_visible_field_on_the_forms_has_a_label(owner_client) -> None:
    for url in ("/gpu/tenants/acme/", "/tenants/new/", "/tokens/"):
        page = owner_client.get(url).content.decode()
        ids = re.findall(r'<(?:input|select|textarea)(?![^>]*type="(?:hidden|submit)")[^>]*\bid="([^"]+)"', page)
        assert ids, url
        for field_id in ids:
            assert f'for="{field_id}"' in page, (url, field_id)
