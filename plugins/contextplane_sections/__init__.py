"""The standard sections of ADR 0108, shipped as ordinary plugins.

Each module is registered on its own through the ``contextplane`` entry-point group, the same
way a third party's plugin is, so any one of them can be switched off with
``CONTEXTPLANE_PLUGINS`` or ``plugins.disabled`` and replaced by another.

Stable prefix (D3), in authority order: ``identity`` (10), ``operating_model`` (20),
``delegation_roster`` (30), ``tool_guidance`` (40), ``operator_guidelines`` (50).

Projected context (D6), in priority order: ``working_state`` (10, never shed), ``always_on``
(20, never shed), ``skills`` (30, degrades to names), ``prior_sessions`` (40, per-entry),
``retrieved`` (50, per-row). The ``injection_log`` observer records what was delivered.
"""
