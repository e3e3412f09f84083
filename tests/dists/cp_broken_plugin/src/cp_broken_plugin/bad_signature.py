"""Implements a real hook with an argument the spec does not have."""

from contextplane import hookimpl


@hookimpl
def register_prompt_sections(register, tenant_id):
    raise AssertionError("never called")
