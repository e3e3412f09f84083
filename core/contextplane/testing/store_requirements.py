"""The storage requirements: knowledge stores (ADR D4, D6, D7) and the records a backend keeps
beside the memories (ADR D5, D8, D9), in documentation order.

Why a table apart from the sections': a store or backend author reads these and no other; ids
and sentences are the published contract (docs/conformance.md), never edited in meaning.
``contextplane.testing.requirements`` turns the entries into ``Requirement`` objects.
"""

from __future__ import annotations

from typing import Final

from contextplane.testing.requirement_entry import Entry

STORE: Final[tuple[Entry, ...]] = (
    # --- knowledge stores (ADR D4, D6, D7) -------------------------------------------------
    Entry(
        "STORE-PROTOCOL",
        "store",
        "The store implements every method of contextplane.store.KnowledgeStore.",
    ),
    Entry(
        "STORE-STAMP-CREATION",
        "store",
        "Every write stamps provenance (source_type), kind, delivery policy, scope (namespace), review "
        "state and aware UTC creation times; explicit values win, otherwise kind and delivery policy "
        "come from the D4 domain table.",
    ),
    Entry(
        "STORE-REVIEW-TIER",
        "store",
        "A new row's review state is derived from its trust tier: operator rows (tier 3) start "
        "confirmed; agent (tier 2), external (tier 1) and unknown or empty source types start pending.",
    ),
    Entry(
        "STORE-DELIVERABLE-REJECTED",
        "store",
        "A rejected row is never deliverable (list_chunks(deliverable=True) and search() exclude it), "
        "and the store still returns it by id.",
    ),
    Entry(
        "STORE-DELIVERABLE-EXPIRED",
        "store",
        "A row whose expires_at is at or before `now` is not deliverable, and the store retains it "
        "(get returns it).",
    ),
    Entry(
        "STORE-DELIVERABLE-SUPERSEDED",
        "store",
        "A superseded row is excluded from delivery, and search(include_superseded=True) still finds it "
        "for audit.",
    ),
    Entry(
        "STORE-DELIVERABLE-INVALIDATED",
        "store",
        "A row invalidated for a reason other than supersession is excluded from delivery, even with "
        "include_superseded=True.",
    ),
    Entry(
        "STORE-SUPERSEDE-ORDER",
        "store",
        "supersede writes the newer row before it invalidates the older one: if the newer row cannot be "
        "written the older row is unchanged and still deliverable; if it can, the older row is kept "
        "(never deleted) with its id and content.",
    ),
    Entry(
        "STORE-SUPERSEDE-CHAIN",
        "store",
        "A superseded row records invalidated_at and invalidation_reason 'superseded_by:<id of its "
        "successor>', so a chain A -> B -> C is followed id by id to the one deliverable row.",
    ),
    Entry(
        "STORE-EXPIRY",
        "store",
        "expires_in_days sets expires_at that many days after the write, expires_at is kept as an aware "
        "UTC time, and set_expires_at moves or clears it.",
    ),
    Entry(
        "STORE-SCOPE-ISOLATION",
        "store",
        "namespaces is an allow-list of scopes: a row is returned only when its namespace is listed, "
        "[] matches nothing and None applies no scope filter, for list_chunks and search alike.",
    ),
    Entry(
        "STORE-POLICY-FILTER",
        "store",
        "delivery_policy='retrieved' also matches rows with no delivery policy (NULL means retrieved); "
        "'always' and 'on_demand' match only rows stamped with them.",
    ),
    Entry(
        "STORE-BACKFILL-TABLE",
        "store",
        "Rows written before D4 get memory_kind and delivery_policy from the D4 table and a review "
        "state from their trust tier on first open, and the domain column is kept.",
        capability="migration",
    ),
    Entry(
        "STORE-HISTORY-MIGRATED",
        "store",
        "Rows that were there before the store kept a history read as present since it started: each "
        "one's history begins with one 'migrated' event at seq 0 carrying its state, a later change "
        "appends its event after that one, the view as of a position before the change shows the row "
        "as the migration left it, and an exact duplicate of such a row is found like any other.",
        capability="migration",
    ),
    Entry(
        "STORE-SEARCH-HOSTILE",
        "store",
        "search never raises on hostile query text (full-text syntax, quotes, operators, control "
        "characters, empty or very long input); it returns a list of hits.",
    ),
    Entry(
        "STORE-SEARCH-RELEVANCE",
        "store",
        "search gives every hit a relevance (SearchHit.relevance) in [0, 1], the figure the retrieved "
        "section's floor context.min_relevance (0.3 by default) compares against: a row holding every "
        "meaningful word of the query ranks first at or above the floor, and a row that shares only "
        "function words with it (the, is, when) is not returned or is below the floor.",
    ),
    Entry(
        "STORE-SEARCH-DEPTH",
        "store",
        "A deeper search never returns fewer rows that answer the question: search(q, 2k) holds at least "
        "as many of the relevant rows as search(q, k). The retrieved section searches as deep as the "
        "budget could hold, so this is what makes a larger budget deliver no fewer relevant memories.",
    ),
    Entry(
        "STORE-CONCURRENT-WRITES",
        "store",
        "Concurrent writes from several threads lose nothing: every returned id is distinct and every "
        "row is readable afterwards.",
        capability="concurrent_writes",
    ),
    Entry(
        "STORE-ROUND-TRIP",
        "store",
        "Every attribute written is read back unchanged: content (any Unicode), domain, source_type, "
        "memory_kind, delivery_policy, review_state, namespace, heading, source, subject, epoch and "
        "expires_at.",
    ),
    Entry(
        "STORE-EVENT-TIME-ROUND-TRIP",
        "store",
        "occurred_at (the event time: when what a memory describes happened) given to add_chunk or "
        "add_chunks as an aware datetime or ISO-8601 text with an offset is read back as the same instant "
        "in aware UTC, a row written without one reads None, and created_at stays the time of the write.",
    ),
    Entry(
        "STORE-EVENT-TIME-DISTINCT",
        "store",
        "The same text written in the same scope by the same writer at two event times is two memories, "
        "each read back with its own occurred_at (a conversation turn repeated on another day is another "
        "event).",
    ),
    Entry(
        "STORE-EVENT-TIME-SUPERSEDE",
        "store",
        "supersede keeps the older row's occurred_at on the newer row unless the newer row gives its own "
        "(None counts as not given).",
    ),
    Entry(
        "STORE-EVENT-TIME-FILTER",
        "store",
        "list_chunks and search with occurred_after and/or occurred_before return only rows whose "
        "occurred_at lies in [occurred_after, occurred_before) (a row without one is in no window), "
        "together with the other filters.",
    ),
    Entry(
        "STORE-EVENT-TIME-INVALID",
        "store",
        "A naive or unparsable occurred_at is refused by add_chunk and add_chunks with an error naming "
        "occurred_at, and nothing of the write is stored (no row of the batch); a bad occurred_after or "
        "occurred_before is refused naming it.",
    ),
    Entry(
        "STORE-HISTORY-APPEND",
        "store",
        "The store keeps a lifecycle history (contextplane.store.MemoryHistory): every change to a row "
        "(created, review state set and by whom, expiry set or cleared, superseded, invalidated, purged) "
        "appends one event carrying the row's lifecycle state after it, in order; earlier events never "
        "change, and a purged row's history remains.",
    ),
    Entry(
        "STORE-ASOF-LIFECYCLE",
        "store",
        "In the view as of a history position every row has the lifecycle state it had then: a row "
        "rejected, superseded or invalidated after the position is deliverable in it, a row confirmed "
        "after it is still pending, for get, list_chunks and search alike.",
    ),
    Entry(
        "STORE-ASOF-MEMBERSHIP",
        "store",
        "Rows written after a history position do not exist in the view as of it: get returns None and "
        "list_chunks and search omit them, deliverable or not.",
    ),
    Entry(
        "STORE-ASOF-EXPIRY",
        "store",
        "The view as of a position evaluates expiry at the position's time: a row that expired after "
        "that time is deliverable in it, and an expiry set or cleared after the position is not seen.",
    ),
    Entry(
        "STORE-ASOF-REPLAY",
        "store",
        "A consistent_read() view reports the history position of the state it reads, and the view as "
        "of that position reads the same rows (get, list_chunks, search) as the consistent view did, "
        "whatever was written or changed since.",
    ),
    Entry(
        "STORE-ASOF-TIME",
        "store",
        "as_of also takes an aware time: the view shows the state after the last event at or before "
        "it, with deliverability evaluated at that time.",
    ),
    Entry(
        "STORE-CONSOLIDATE-DUPLICATE",
        "store",
        "An exact duplicate of a deliverable row (the same content once runs of whitespace are "
        "collapsed, the same namespace and source_type) is not stored again: the write returns the "
        "existing row's id with outcome 'duplicate' and duplicate_of naming it (a WriteOutcome); the "
        "same text in another scope, from another provenance, in another case, or copying a row that "
        "is no longer deliverable is stored as a new row.",
    ),
    Entry(
        "STORE-CONSOLIDATE-OUTDATED",
        "store",
        "Writing again the text of a superseded row (same scope and source_type) while the row that "
        "superseded it, followed to the end of the chain, is deliverable stores nothing: the write "
        "returns that head's id with outcome 'outdated' and duplicate_of naming the superseded row, "
        "and the head stays the one deliverable row; once the head is no longer deliverable the same "
        "write is stored.",
    ),
    Entry(
        "STORE-CONSOLIDATE-SUBJECT",
        "store",
        "A write naming a subject held by a deliverable row of the same scope and kind supersedes it: "
        "the new row is stored with outcome 'superseded' listing the old ids, the old row is kept, "
        "invalidated with superseded_by the new id, and rows of another scope or kind are left alone; "
        "add_chunks naming one subject three times leaves a linear chain with one deliverable head.",
    ),
    Entry(
        "STORE-CONSOLIDATE-NEAR",
        "store",
        "A single write whose word set (NFKC, case-folded) has a Jaccard index of at least 0.8 with a "
        "deliverable row of its scope is stored and reported, never merged: outcome 'near_duplicate', "
        "near_duplicates holding (id, similarity) of that row; both rows stay deliverable, and a row "
        "below the threshold or in another scope is not reported.",
    ),
    Entry(
        "STORE-CONSOLIDATE-HISTORY",
        "store",
        "Each consolidation outcome is in the lifecycle history: a duplicate write appends a "
        "'consolidated' event to the row it returned; a superseding row's 'created' event has outcome "
        "'superseded' in its detail and the old row gets a 'superseded' event naming it; a near "
        "duplicate's 'created' event lists its near duplicates.",
    ),
    Entry(
        "STORE-CONSOLIDATE-RACE",
        "store",
        "A supersede of a subject's head and a write naming the same subject, scope and kind, run at "
        "the same moment, leave exactly one deliverable row of the subject: the later one supersedes "
        "the other's row, or the supersede fails (StoreError) because its row is no longer valid.",
        capability="concurrent_writes",
    ),
    Entry(
        "STORE-GET-UNKNOWN",
        "store",
        "get returns None for an id that names no row, malformed ids included, and never raises.",
    ),
    Entry(
        "STORE-CONSISTENT-READ",
        "store",
        "consistent_read() yields a view whose get, list_chunks and search see the state committed when "
        "it opened: a row added, superseded or rejected afterwards is seen by the store and not through "
        "the view.",
        capability="consistent_read",
    ),
    Entry(
        "STORE-ASYNC-PARITY",
        "store",
        "Through contextplane.store.aio (the store's own async methods where it has them), asearch, "
        "alist_chunks, aadd_chunk, asupersede and aset_review_state give what search, list_chunks, "
        "add_chunk, supersede and set_review_state give.",
    ),
    Entry(
        "STORE-VECTOR-SPACE-RECORDED",
        "store",
        "A store opened with an embedder records its vector space: vector_space() returns the "
        "embedder's (name, dimensions) once rows are written, every row written with it has a vector, "
        "and vectorless_count() counts the rows written while no embedder was configured.",
        capability="vector_space",
    ),
    Entry(
        "STORE-VECTOR-SPACE-MISMATCH",
        "store",
        "Opening a store with an embedder of another name (same dimensions) or other dimensions raises "
        "VectorSpaceError naming both embedders and `contextplane memory reindex --rebuild`; nothing "
        "is mixed and the stored space is unchanged.",
        capability="vector_space",
    ),
    Entry(
        "STORE-VECTOR-REBUILD",
        "store",
        "rebuild_vectors(embedder) on the store opened without an embedder re-embeds every row with it "
        "and records its space: the store then opens with that embedder, finds its rows through the "
        "vector leg, and refuses the old one.",
        capability="vector_space",
    ),
    Entry(
        "STORE-RESTORE-EXACT",
        "store",
        "restore_chunks(rows) puts exported rows back as given: get and list_chunks read every "
        "attribute back (id, times, invalidation, supersession link, expiry and event time included), "
        "search finds a restored row by its words, each row's history is one 'created' event at the "
        "restore whose detail says it was restored, and a later write gets an id of its own; an id the "
        "store already holds is refused with StoreError naming it, and nothing of that call is stored.",
        capability="exact_restore",
    ),
    Entry(
        "STORE-FOLLOWING",
        "store",
        "following(ids) maps each id to the first memory written after it (ids ascend in write order) in "
        "the same scope (namespace) from the same source (source_type and source: the same "
        "conversation): rows of other scopes or sources written in between are skipped, the last row "
        "of a scope has none, an id naming no row (malformed ids included) is absent and never an error, "
        "and a single string instead of a list of ids is refused with ValidationError.",
        capability="following",
    ),
    Entry(
        "STORE-FOLLOWING-DELIVERABLE",
        "store",
        "following steps over rows that are not deliverable at `now` (rejected, expired, invalidated or "
        "superseded) to the next deliverable row of the scope, and with deliverable=False returns the "
        "very next row whatever its state.",
        capability="following",
    ),
    Entry(
        "STORE-FOLLOWING-ASOF",
        "store",
        "following through a view reads the view's state: through consistent_read() a row written after "
        "the view opened is not returned, and as of a history position a row written after it does not "
        "exist while a row rejected after it is still returned.",
        capability="following",
    ),
    Entry(
        "STORE-FOLLOWING-ASYNC",
        "store",
        "contextplane.store.aio.afollowing (the store's own afollowing where it has one) gives what "
        "following gives, deliverable or not.",
        capability="following",
    ),
)

RECORDS: Final[tuple[Entry, ...]] = (
    # --- backends: the records beside the memories (ADR D5, D8, D9) ------------------------
    Entry(
        "RECORDS-BACKEND",
        "records",
        "The backend has a name (text) and memories, summaries, injections and snapshots implementing "
        "KnowledgeStore, SessionSummaries, InjectionLog and SnapshotStore; trajectory is None or has "
        "append and read.",
    ),
    Entry(
        "RECORDS-SUMMARIES-NEWEST",
        "records",
        "summaries.newest(limit) returns at most limit summaries, newest first (by created_at, then by "
        "insertion), never one of exclude_session, each read back as written; count() counts them all.",
    ),
    Entry(
        "RECORDS-SUMMARIES-RELEVANT",
        "records",
        "summaries.relevant(query, limit) returns only summaries sharing a word with query, the best "
        "match first, never one of exclude_session, an empty list when nothing matches, and never raises "
        "on hostile query text.",
    ),
    Entry(
        "RECORDS-SUMMARIES-INVALID",
        "records",
        "summaries.add refuses an empty or non-text session_id, summary, topic or kind with "
        "contextplane.errors.ValidationError and stores nothing.",
    ),
    Entry(
        "RECORDS-INJECTIONS-APPEND",
        "records",
        "injections.record returns distinct, increasing ids; rows() returns every row in recorded order "
        "with its fields and delivered ids unchanged, rows(session_id) only that session's and "
        "rows(limit=n) the first n.",
    ),
    Entry(
        "RECORDS-DURABLE-OR-REPORTED",
        "records",
        "A turn's records are durable or reported: a composed turn whose record_status is 'recorded' "
        "has its injection-log row (and its inputs, where the snapshot store keeps them) read back, "
        "and a record write the backend cannot keep (here: after close()) raises, so the turn's "
        "record_status starts with 'failed' instead of the records vanishing without a word.",
    ),
    Entry(
        "RECORDS-SNAPSHOTS-ROUND-TRIP",
        "records",
        "A snapshot put is read back by get, list and count with every field unchanged (after flush); a "
        "second put with the same key replaces it; list(session_id) holds only that session's, in key "
        "order.",
    ),
    Entry(
        "RECORDS-SNAPSHOTS-PREFIX",
        "records",
        "register_prefix keeps one prefix per hash: a text-less entry gains its text on the first "
        "registration that brings one, and a stored text is never replaced, by another text or by None.",
    ),
    Entry(
        "RECORDS-SNAPSHOTS-SESSIONS",
        "records",
        "snapshots.sessions() gives (session id, snapshot count, newest created_at) per session, newest "
        "first, and list(limit=n) keeps the n newest snapshots, in key order.",
    ),
    Entry(
        "RECORDS-SNAPSHOTS-CACHE-PREFIX",
        "records",
        "A snapshot's cacheable-prefix figures (cache_prefix_sha256, cache_prefix_chars, "
        "cache_shared_chars, cache_break) are read back by get and list unchanged, an unknown share "
        "(None) as None; a snapshot put without them, or put again without them under the same key, "
        "reads back with cache None, never with figures made up or left over.",
    ),
    Entry(
        "RECORDS-ASYNC-PARITY",
        "records",
        "Through contextplane.records.aio (a part's own async methods where it has them), the summaries' "
        "aadd, anewest and arelevant, the injection log's arecord and arows, the snapshot store's "
        "aregister_prefix, aput, aflush, aget and alist, and aput_inputs and aget_inputs of a store that "
        "keeps turn inputs, give what their synchronous twins give.",
    ),
    Entry(
        "RECORDS-TRAJECTORY",
        "records",
        "trajectory.append returns the session's entry references counting from '1', and read(session) "
        "returns that session's entries in order with their kind and data.",
        capability="trajectory",
    ),
)
