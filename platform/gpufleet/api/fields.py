"""Serializer fields shared by the API apps."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gpufleet import k8s_names


class NameField(serializers.CharField):
    """A name that reaches Kubernetes (slug, flavor, cohort...): a JSON string taken as sent.

    DRF's CharField turns the number 123 into "123" and strips whitespace, so `"slug": 123` and
    `"slug": "abc\\n"` would reach the action as a different, valid-looking name. This field refuses
    non-strings and keeps the text unchanged; the Kubernetes rule itself is checked by the action
    (gpufleet.k8s_names), which the CLI and the portal call too.
    """

    refuses_whitespace = True  # anywhere in the name, with its own reason (to_internal_value below)

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        # Whitespace, control characters and look-alikes anywhere: refused here, not only by the action, because
        # some views look the name up first (" acme" was "no such tenant", a 404, not a 400 naming the field).
        if problems := k8s_names.text_problems(data):
            raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


class Prose(serializers.CharField):
    """Free text a person writes (a reason, a review comment, a note): a JSON string kept exactly as sent.

    Every other text field of a request refuses leading and trailing whitespace (gpufleet.api.serializers);
    prose may start or end with a space or a line break, and is not trimmed either."""

    prose = True

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
