"""The conformance kit: pytest base classes a plugin, store or runtime-adapter author subclasses
in one line.

    from contextplane.testing import ContextSectionConformance

    class TestMyPlugin(ContextSectionConformance):
        @pytest.fixture
        def plugin(self): ...

Every check carries a requirement id (``CTX-SHED-ORDER``) in its test id and failure message;
docs/conformance.md is the reference. The kit's pytest plugin (``contextplane.testing.
pytest_plugin``, registered through the ``pytest11`` entry point) adds a ``conformance``
marker and names the requirement in every failure report.

Why the names are loaded lazily: the pytest plugin imports this package in *every* pytest run
of an environment where contextplane is installed. Loading the check modules only when a test
asks for them keeps that cheap, and means they are imported after pytest's assertion-rewrite
hook is in place, so their ``assert`` statements are rewritten (registered below).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pytest

_CHECK_MODULES = (
    "contextplane.testing._base",
    "contextplane.testing.harness",
    "contextplane.testing.prompt_checks",
    "contextplane.testing.context_checks",
    "contextplane.testing.sections",
    "contextplane.testing.stores",
    "contextplane.testing.records",
    "contextplane.testing.runtimes",
    "contextplane.testing.runtime_harness",
)
pytest.register_assert_rewrite(*_CHECK_MODULES)

if TYPE_CHECKING:
    from contextplane.testing._base import ConformanceBase, KitUsageError, MissingFixture, PluginNotLoadable
    from contextplane.testing.context_checks import (
        ContextBudgetChecks,
        ContextDraftChecks,
        ContextIsolationChecks,
        SpyStore,
    )
    from contextplane.testing.inputs import PAYLOAD_MARKER, SectionInput, hostile_payload
    from contextplane.testing.kit_run import (
        REQUIREMENT_PROPERTY,
        CheckResult,
        KitCheck,
        KitRun,
        failed_requirements,
        kit_checks,
        requirement_id,
        run_checks,
    )
    from contextplane.testing.prompt_checks import PromptSectionChecks
    from contextplane.testing.records import (
        BackendConformance,
        BackendShapeChecks,
        DurabilityChecks,
        InjectionChecks,
        SnapshotChecks,
        SummaryChecks,
        TrajectoryChecks,
    )
    from contextplane.testing.requirements import (
        RECORDS_CAPABILITIES,
        REQUIREMENTS,
        RUNTIME_CAPABILITIES,
        STORE_CAPABILITIES,
        ConformanceFailure,
        Requirement,
        requirement,
        requirements_of,
    )
    from contextplane.testing.runtime_harness import (
        KIT_TOOL,
        ModelCall,
        ResumableHarness,
        RuntimeHarness,
        RuntimeKit,
        SeenMessage,
        ToolCall,
        kit_lookup,
        new_runtime_kit,
    )
    from contextplane.testing.runtimes import RuntimeConformance
    from contextplane.testing.sections import (
        ContextSectionChecks,
        ContextSectionConformance,
        PromptSectionConformance,
        SectionPluginConformance,
    )
    from contextplane.testing.stores import (
        D4_TABLE,
        HOSTILE_QUERIES,
        REVIEW_BY_SOURCE,
        KnowledgeStoreConformance,
        LegacyRow,
        StoreAsyncChecks,
        StoreConsistencyChecks,
        StoreDeliveryChecks,
        StoreHistoryChecks,
        StoreLifecycleChecks,
        StoreMigrationChecks,
        StoreRobustnessChecks,
        StoreScopeChecks,
        StoreWriteChecks,
    )

_WHERE: dict[str, str] = {
    "ConformanceBase": "_base",
    "KitUsageError": "_base",
    "MissingFixture": "_base",
    "PluginNotLoadable": "_base",
    "PAYLOAD_MARKER": "inputs",
    "SectionInput": "inputs",
    "hostile_payload": "inputs",
    "REQUIREMENTS": "requirements",
    "REQUIREMENT_PROPERTY": "kit_run",
    "CheckResult": "kit_run",
    "KitCheck": "kit_run",
    "KitRun": "kit_run",
    "failed_requirements": "kit_run",
    "kit_checks": "kit_run",
    "requirement_id": "kit_run",
    "run_checks": "kit_run",
    "RECORDS_CAPABILITIES": "requirements",
    "BackendConformance": "records",
    "BackendShapeChecks": "records",
    "InjectionChecks": "records",
    "SnapshotChecks": "records",
    "DurabilityChecks": "records",
    "SummaryChecks": "records",
    "TrajectoryChecks": "records",
    "StoreConsistencyChecks": "stores",
    "RUNTIME_CAPABILITIES": "requirements",
    "KIT_TOOL": "runtime_harness",
    "ModelCall": "runtime_harness",
    "ResumableHarness": "runtime_harness",
    "RuntimeHarness": "runtime_harness",
    "RuntimeKit": "runtime_harness",
    "SeenMessage": "runtime_harness",
    "ToolCall": "runtime_harness",
    "kit_lookup": "runtime_harness",
    "new_runtime_kit": "runtime_harness",
    "RuntimeConformance": "runtimes",
    "STORE_CAPABILITIES": "requirements",
    "ConformanceFailure": "requirements",
    "Requirement": "requirements",
    "requirement": "requirements",
    "requirements_of": "requirements",
    "ContextBudgetChecks": "context_checks",
    "ContextDraftChecks": "context_checks",
    "ContextIsolationChecks": "context_checks",
    "ContextSectionChecks": "sections",
    "ContextSectionConformance": "sections",
    "PromptSectionChecks": "prompt_checks",
    "PromptSectionConformance": "sections",
    "SectionPluginConformance": "sections",
    "SpyStore": "context_checks",
    "D4_TABLE": "stores",
    "HOSTILE_QUERIES": "stores",
    "KnowledgeStoreConformance": "stores",
    "LegacyRow": "stores",
    "REVIEW_BY_SOURCE": "stores",
    "StoreAsyncChecks": "stores",
    "StoreDeliveryChecks": "stores",
    "StoreHistoryChecks": "stores",
    "StoreLifecycleChecks": "stores",
    "StoreMigrationChecks": "stores",
    "StoreRobustnessChecks": "stores",
    "StoreScopeChecks": "stores",
    "StoreWriteChecks": "stores",
}

__all__ = [
    "D4_TABLE",
    "HOSTILE_QUERIES",
    "KIT_TOOL",
    "PAYLOAD_MARKER",
    "RECORDS_CAPABILITIES",
    "REQUIREMENTS",
    "REQUIREMENT_PROPERTY",
    "REVIEW_BY_SOURCE",
    "RUNTIME_CAPABILITIES",
    "STORE_CAPABILITIES",
    "BackendConformance",
    "BackendShapeChecks",
    "CheckResult",
    "ConformanceBase",
    "ConformanceFailure",
    "ContextBudgetChecks",
    "ContextDraftChecks",
    "ContextIsolationChecks",
    "ContextSectionChecks",
    "ContextSectionConformance",
    "DurabilityChecks",
    "InjectionChecks",
    "KitCheck",
    "KitRun",
    "KitUsageError",
    "KnowledgeStoreConformance",
    "LegacyRow",
    "MissingFixture",
    "ModelCall",
    "PluginNotLoadable",
    "PromptSectionChecks",
    "PromptSectionConformance",
    "Requirement",
    "ResumableHarness",
    "RuntimeConformance",
    "RuntimeHarness",
    "RuntimeKit",
    "SectionInput",
    "SectionPluginConformance",
    "SeenMessage",
    "SnapshotChecks",
    "SpyStore",
    "StoreAsyncChecks",
    "StoreConsistencyChecks",
    "StoreDeliveryChecks",
    "StoreHistoryChecks",
    "StoreLifecycleChecks",
    "StoreMigrationChecks",
    "StoreRobustnessChecks",
    "StoreScopeChecks",
    "StoreWriteChecks",
    "SummaryChecks",
    "ToolCall",
    "TrajectoryChecks",
    "failed_requirements",
    "hostile_payload",
    "kit_checks",
    "kit_lookup",
    "new_runtime_kit",
    "requirement",
    "requirement_id",
    "requirements_of",
    "run_checks",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'contextplane.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"contextplane.testing.{module}"), name)
    globals()[name] = value
    return value
