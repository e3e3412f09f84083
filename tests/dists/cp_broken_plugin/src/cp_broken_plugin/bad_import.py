"""Fails at import, as a plugin with a missing dependency does."""

import cp_no_such_dependency  # noqa: F401
