"""The store's schema migrations: one module per schema version step (``to_v2`` .. ``to_v5``,
the version-1 input in ``v1_input``), the registry that runs them in order (``registry``), and
one module per other job: the row passes (``backfill``) and the SQL they derive cells with
(``rules``), the full-text index (``fts``) and its stemmed rebuild (``stemming``), the read
path's upkeep at open (``read_path``), the refusals at open (``checks``), the dry run
(``dry_run``), and the schema state every step reads (``state``).

``contextplane.store.migrate`` re-exports every name these modules had there, as it was.
"""
