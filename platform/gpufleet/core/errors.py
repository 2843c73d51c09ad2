"""Errors actions raise for bad input. The API turns them into 400s naming each field."""

from __future__ import annotations


class ActionError(Exception):
    """Bad input or a forbidden transition. `errors` maps field -> reasons ('' for the whole request)."""

    def __init__(self, errors: dict[str, list[str]] | str, code: str = "invalid") -> None:
        if isinstance(errors, str):
            errors = {"": [errors]}
        self.errors = errors
        self.code = code
        super().__init__("; ".join(f"{k or 'request'}: {', '.join(v)}" for k, v in errors.items()))


class Conflict(ActionError):
    """The request is valid but conflicts with the current state (e.g. approving a deleted tenant)."""

    def __init__(self, message: str) -> None:
        super().__init__({"": [message]}, code="conflict")


class Forbidden(ActionError):
    """The caller may not do this (e.g. grant a role above their own); the API answers 403."""

    def __init__(self, message: str) -> None:
        super().__init__({"": [message]}, code="forbidden")
