"""Issue 25, step 8: the kit's store and context checks, its requirement tables, the store CLI,
``config``, ``explain.verdict`` and ``store.vector_index`` were split by job, and every import path
used before still works.

Why these checks: third parties subclass the kit's classes and import the store CLI's and the
configuration's names; tests patch names on the old paths. A name that moved must still import
from there as the very object its new home holds, a patch set on the old path must reach the
code that reads the name, and the kit's new modules must still be assertion-rewritten (a plain
``assert`` in a check reports its operands).
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

#: (old import path, the modules it was split into, every name the old module defined).
SPLITS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        'contextplane.config',
        ('contextplane.config.schema', 'contextplane.config.structuring', 'contextplane.config.loading'),
        ('ENV_PREFIX', 'CONFIG_FILENAME', '_expect', '_FieldError', '_ge0', '_ge0_or_none', '_pct', '_positive_or_none', '_row_bound', '_unit', '_share', '_tier', 'ContextConfig', 'PluginsConfig', 'StoreConfig', 'ToolsConfig', '_positive', 'EmbedderConfig', 'PromptConfig', 'SkillsConfig', 'SubagentConfig', 'ObservabilityConfig', 'Config', 'converter', '_strict_bool', '_strict_int', '_strict_float', '_strict_str', '_strict_str_list', '_register_hooks', '_INTERNAL', '_fields_by_path', '_lookup', '_show', '_known_keys', '_explain', '_parse_env_value', 'env_overrides', 'find_config_file', '_merge', 'structure', 'load_config', 'DEFAULT'),
    ),
    (
        'contextplane.explain.verdict',
        ('contextplane.explain.evidence', 'contextplane.explain.filters', 'contextplane.explain.ranking'),
        ('VerdictKind', 'POLICY_SECTIONS', '_frozen', 'Verdict', '_plain', '_event_evidence', '_last', '_Turn', '_row_of', '_delivered', '_lifecycle', '_filtered', '_request_rules', '_shed', '_would_offer', '_section_rules', '_cut_off', '_retrieval', '_below_relevance', '_past_budget', '_never_retrieved', '_gone', 'judge', '_now_view', 'explain'),
    ),
    (
        'contextplane.store.vector_index',
        ('contextplane.store.vector_index.ivf', 'contextplane.store.vector_index.chance', 'contextplane.store.vector_index.training'),
        ('LIST_SHIFT', '_LIST_SPAN', '_VECTOR_TABLES_SQL', '_NEAREST_LIST_SQL', '_INSERT_VECTOR_SQL', 'KMeansStep', 'VectorSearchUnavailableWarning', 'load_sqlite_vec', 'attach', '_positive_dims', 'require_space', 'record_space', 'start_rebuild', 'missing_count', 'as_float32', 'pack', 'add_vectors', 'clear', 'probes', 'vector_leg', 'neighbours', 'CALIBRATION_SAMPLE', 'MIN_CALIBRATION', '_MAD_SIGMA', '_SAMPLED_SQL', '_CALIBRATION_SOURCE', '_FIRST_ROWS_SOURCE', '_SAMPLE_KEY_SQL', 'chance_similarity', 'chance_level', '_ceiling', 'vector_relevance', 'ChanceLevel', '_keep_calibration', 'INLINE_TRAINING_MAX_VECTORS', 'training_due', '_training_due', 'inline_training_due', '_numpy', 'training_numpy', '_kmeans_numpy', '_assign_numpy', '_load_training_centroids', 'kmeans_step', 'train'),
    ),
    (
        'contextplane.store.cli',
        ('contextplane.store.cli_options', 'contextplane.store.cli_output', 'contextplane.store.cli_browse', 'contextplane.store.cli_curate', 'contextplane.store.cli_upkeep'),
        ('F', 'log', 'PROGRESS_MIN_ROWS', '_CONTENT_WIDTH', 'DAYS', '_json_option', '_store_options', '_open', '_short', '_status', 'curator', '_HEADERS', '_headers', '_row', '_emit_chunks', '_emit_one', '_write_options', '_with_write_options', '_given', '_checked_source_type', '_content', '_raw_content', '_strip_one_newline', '_bounded', '_read_bytes', '_decode', '_event_window_options', '_event_window', 'memory', '_file_option', 'add_command', 'list_command', 'SHOW_CHARS', 'SHOW_MARKER', 'show_command', '_emit_hits', 'search_command', '_review', 'confirm_command', 'reject_command', 'supersede_command', 'expire_command', 'purge_command', '_superseded_another', 'export_command', 'import_command', 'status_command', 'reindex_command', 'migrate_command', '_result_dict', '_print_dry_run', 'register'),
    ),
    (
        'contextplane.testing.context_checks',
        ('contextplane.testing.context_checks.base', 'contextplane.testing.context_checks.drafts', 'contextplane.testing.context_checks.budget', 'contextplane.testing.context_checks.isolation'),
        ('_ROLE_AT_LINE_START', '_INSTRUCTION_TOKEN', '_TAG', 'SpyStore', 'drafted', '_error_kind', 'parity_difference', 'async_difference', '_rows_of', 'ContextSectionHarness', '_ContextSectionBase', 'ContextDraftChecks', '_shed_alone', '_room_freed', 'ContextBudgetChecks', 'ContextIsolationChecks', '_budgets', '_row_diff'),
    ),
    (
        'contextplane.testing.stores',
        ('contextplane.testing.stores.common', 'contextplane.testing.stores.writes', 'contextplane.testing.stores.delivery', 'contextplane.testing.stores.migration', 'contextplane.testing.stores.robustness', 'contextplane.testing.stores.history', 'contextplane.testing.stores.consolidation', 'contextplane.testing.stores.event_time', 'contextplane.testing.stores.vectors', 'contextplane.testing.stores.restore'),
        ('LegacyRow', 'D4_TABLE', 'REVIEW_BY_SOURCE', 'HOSTILE_QUERIES', 'RELEVANCE_FILLER', '_SLACK', 'RACING_PAIRS', '_aware_utc', '_StoreBase', '_get', '_ids', '_hit_ids', 'StoreWriteChecks', 'StoreDeliveryChecks', 'StoreLifecycleChecks', 'StoreScopeChecks', 'StoreMigrationChecks', 'StoreRobustnessChecks', 'StoreConsistencyChecks', 'StoreAsyncChecks', '_shape', '_history_of', '_as_of', '_pause', 'StoreHistoryChecks', '_outcome', 'StoreConsolidationChecks', '_MAY', '_JUNE', '_JULY', 'StoreEventTimeChecks', 'KitEmbedder', 'StoreVectorSpaceChecks', '_restore_rows', '_as_written', 'StoreRestoreChecks', 'KnowledgeStoreConformance'),
    ),
    (
        'contextplane.testing.requirements',
        ('contextplane.testing.requirement_entry',),
        ('Kind', 'ConformanceFailure', 'Requirement', 'conformance_doc', '_ALL', 'REQUIREMENTS', 'STORE_CAPABILITIES', 'RECORDS_CAPABILITIES', 'requirement', 'requirements_of'),
    ),
)  # fmt: skip


CASES = [(old, homes, name) for old, homes, names in SPLITS for name in names]


def _home_of(name: str, old: types.ModuleType, homes: tuple[str, ...]) -> object:
    for home in homes:
        module = importlib.import_module(home)
        if name in module.__dict__:
            return module.__dict__[name]
    assert name in old.__dict__, f"{name} lives in none of {homes} and not in {old.__name__}"
    return old.__dict__[name]


@pytest.mark.parametrize(
    ("old", "homes", "name"), CASES, ids=[f"{o.rsplit('.', 1)[-1]}.{n}" for o, _h, n in CASES]
)
def test_every_name_the_old_module_had_imports_from_it_as_its_home_object(
    old: str, homes: tuple[str, ...], name: str
) -> None:
    module = importlib.import_module(old)
    assert getattr(module, name) is _home_of(name, module, homes)


def test_the_kit_is_unchanged_for_a_store_and_section_author() -> None:
    """The names ``contextplane.testing`` documents still come from it, as the classes the kit
    runs; ``KnowledgeStoreConformance`` keeps its module (a third party's repr, pickles, docs)."""
    import contextplane.testing as kit
    from contextplane.testing import stores

    assert kit.KnowledgeStoreConformance is stores.KnowledgeStoreConformance
    assert kit.KnowledgeStoreConformance.__module__ == "contextplane.testing.stores"
    assert kit.ConformanceFailure.__module__ == "contextplane.testing.requirements"
    groups = [c.__name__ for c in kit.KnowledgeStoreConformance.__mro__ if c.__name__.startswith("Store")]
    assert groups == [
        "StoreFollowingChecks", "StoreRestoreChecks", "StoreEventTimeChecks", "StoreVectorSpaceChecks", "StoreConsolidationChecks",
        "StoreAsyncChecks", "StoreHistoryChecks", "StoreConsistencyChecks", "StoreRobustnessChecks",
        "StoreMigrationChecks", "StoreScopeChecks", "StoreLifecycleChecks", "StoreDeliveryChecks",
        "StoreWriteChecks",
    ]  # fmt: skip
    # the 77 a store or section author runs, in their order (72, then session 9's
    # RECORDS-SNAPSHOTS-CACHE-PREFIX after RECORDS-SNAPSHOTS-SESSIONS, then session 10's four
    # STORE-FOLLOWING* after STORE-RESTORE-EXACT); the runtime kit's (issue 24) come after
    theirs = [r for r in kit.REQUIREMENTS.values() if r.kind != "runtime"]
    assert len(theirs) == 77 and kit.requirement("STORE-PROTOCOL").kind == "store"
    assert list(kit.REQUIREMENTS.values())[:77] == theirs
    stores = [r.id for r in theirs if r.kind == "store"]
    assert stores[stores.index("STORE-RESTORE-EXACT") + 1 :] == [
        "STORE-FOLLOWING", "STORE-FOLLOWING-DELIVERABLE", "STORE-FOLLOWING-ASOF", "STORE-FOLLOWING-ASYNC",
    ]  # fmt: skip
    records = [r.id for r in theirs if r.kind == "records"]
    assert records[records.index("RECORDS-SNAPSHOTS-SESSIONS") + 1] == "RECORDS-SNAPSHOTS-CACHE-PREFIX"
    assert [r.kind for r in kit.REQUIREMENTS.values()] == sorted(
        (r.kind for r in kit.REQUIREMENTS.values()),
        key=["prompt", "context", "store", "records", "runtime"].index,
    )


@pytest.mark.parametrize(
    "module",
    [
        "contextplane.testing.stores.writes",
        "contextplane.testing.stores.common",
        "contextplane.testing.context_checks.drafts",
        "contextplane.testing.context_checks.base",
    ],
)
def test_the_kits_new_modules_are_assertion_rewritten(module: str) -> None:
    loaded = importlib.import_module(module)
    assert type(loaded.__loader__).__name__ == "AssertionRewritingHook", module


def test_a_patch_on_the_old_vector_index_path_reaches_every_module_that_reads_it() -> None:
    from contextplane.store import vector_index
    from contextplane.store.vector_index import chance, ivf, training

    def no_numpy() -> None:
        return None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(vector_index, "_numpy", no_numpy)
        assert ivf._numpy is chance._numpy is training._numpy is no_numpy
        assert training.training_numpy(None) is None  # the SQL path, as with numpy missing
        mp.setattr(vector_index, "INLINE_TRAINING_MAX_VECTORS", 7)
        assert training.INLINE_TRAINING_MAX_VECTORS == 7
    assert ivf._numpy is chance._numpy is training._numpy is vector_index._numpy is not no_numpy


def test_a_patch_on_the_old_store_cli_path_reaches_the_commands() -> None:
    from contextplane.store import cli, cli_options, cli_upkeep

    def opener(*_a: object, **_k: object) -> object:
        raise AssertionError("not called")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cli, "command_backend", opener)
        assert cli_options.command_backend is opener and cli_upkeep.command_backend is opener
    assert cli_options.command_backend is cli.command_backend is not opener


def test_a_patch_on_the_old_config_path_reaches_the_loader() -> None:
    import contextplane.config as config
    from contextplane.config import loading

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "ENV_PREFIX", "OTHER_")
        assert loading.env_overrides({"OTHER_CONTEXT__BUDGET_PCT": "4"}) == {"context": {"budget_pct": 4}}
    assert config.env_overrides({"OTHER_CONTEXT__BUDGET_PCT": "4"}) == {}


def test_confirm_and_reject_are_one_command_shape() -> None:
    """D28: the two review commands were two copies of one body; they are made by one factory
    now, so their arguments and options cannot drift apart."""
    from contextplane.store import cli

    def shape(command: object) -> list[tuple[str | None, tuple[str, ...]]]:
        return [(p.name, tuple(p.opts)) for p in command.params]  # type: ignore[attr-defined]

    assert shape(cli.confirm_command) == shape(cli.reject_command) != []
    confirm, reject = cli.confirm_command.callback, cli.reject_command.callback
    assert confirm is not None and reject is not None
    assert confirm.__code__ is reject.__code__, "confirm and reject are two copies of one body again"
    # add and supersede take the same text and attributes (supersede names the old row first)
    assert shape(cli.supersede_command) == [("old_id", ("old_id",)), *shape(cli.add_command)]
    assert cli.memory.commands["confirm"] is cli.confirm_command
    assert cli.memory.commands["reject"] is cli.reject_command


def test_no_old_module_file_is_left_beside_its_package() -> None:
    """A module that became a package leaves no ``x.py`` beside ``x/``: Python imports the
    package and silently ignores the file, so an edit to the stale file would change nothing."""
    left = []
    for old, _homes, _names in SPLITS:
        module = importlib.import_module(old)
        assert sys.modules[old] is module and module.__file__ is not None
        path = Path(module.__file__)
        if path.name == "__init__.py" and path.parent.with_suffix(".py").exists():
            left.append(str(path.parent.with_suffix(".py")))
    assert not left, f"stale modules beside their packages: {left}"
    assert any(Path(importlib.import_module(o).__file__ or "").name == "__init__.py" for o, _h, _n in SPLITS)
