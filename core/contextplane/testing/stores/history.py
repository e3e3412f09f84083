"""The lifecycle history and as-of reads: what the store can say about the past (who changed a
row, when, and what it looked like at a history position).

Why its own module: the history is what a recorded turn is explained and replayed against
(``contextplane explain``), and its checks are the longest group; the helpers that read a
store's history (``_history_of``, ``_as_of``) are ``common``'s, since other groups read it too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import _as_of, _history_of, _ids, _pause, _StoreBase


class StoreHistoryChecks(_StoreBase):
    """The lifecycle history and as-of reads: what the store can say about the past."""

    @checks("STORE-HISTORY-APPEND")
    def test_store_history_append(self, store: KnowledgeStore, requirement: Requirement) -> None:
        history = _history_of(store, requirement)
        a = store.add_chunk("kiwi history one", "fact", "extracted")
        b = store.add_chunk("kiwi history two", "fact", "operator")
        store.set_review_state(a, "confirmed", by="curator-kit")
        store.set_expires_at(a, datetime(2031, 1, 1, tzinfo=UTC), by="curator-kit")
        store.set_expires_at(a, None, by="curator-kit")
        c = store.supersede(b, "kiwi history three")
        gone = store.add_chunk("kiwi history doomed", "fact", "operator")
        store.invalidate_chunk(gone, reason="kit says wrong", by="curator-kit")
        before = [(e.seq, e.event, e.review_state) for e in history.history(a)]
        expected = [
            ("created", "pending", None, None),
            ("review", "confirmed", None, "curator-kit"),
            ("expiry", "confirmed", datetime(2031, 1, 1, tzinfo=UTC), "curator-kit"),
            ("expiry", "confirmed", None, "curator-kit"),
        ]
        got = [
            (e.event, e.review_state, e.expires_at, e.actor if e.event != "created" else None)
            for e in history.history(a)
        ]
        requirement.check(
            got == expected,
            f"history({a!r}) reads {got}; expected (event, review_state, expires_at, actor) {expected}",
        )
        seqs = [e.seq for e in history.history(a)]
        requirement.check(
            seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"event seqs {seqs} are not increasing"
        )
        old = [(e.event, e.superseded_by) for e in history.history(b)]
        requirement.check(
            old[-1] == ("superseded", c),
            f"history({b!r}) ends with {old[-1]}; a supersede must append ('superseded', {c!r})",
        )
        requirement.check(
            [e.event for e in history.history(c)][:1] == ["created"],
            f"the superseding row {c!r} has history {[e.event for e in history.history(c)]}",
        )
        dropped = history.history(gone)
        requirement.check(
            [e.event for e in dropped] == ["created", "invalidated"]
            and dropped[-1].invalidation_reason == "kit says wrong"
            and dropped[-1].actor == "curator-kit",
            f"history({gone!r}) after invalidate_chunk(reason=..., by='curator-kit') reads "
            f"{[(e.event, e.invalidation_reason, e.actor) for e in dropped]}",
        )
        store.purge()
        after_purge = history.history(gone)
        requirement.check(
            [e.event for e in after_purge] == ["created", "invalidated", "purged"],
            f"after purge() the purged row's history reads {[e.event for e in after_purge]}; it must remain "
            "and end with 'purged'",
        )
        requirement.check(
            [(e.seq, e.event, e.review_state) for e in history.history(a)] == before,
            "earlier events of a row changed after later writes; the history must only be appended to",
        )
        position = history.history_position()
        requirement.check(
            position.seq >= max(e.seq for e in after_purge),
            f"history_position() is {position.seq}, before the latest event "
            f"{max(e.seq for e in after_purge)}",
        )

    @checks("STORE-ASOF-LIFECYCLE")
    def test_store_asof_lifecycle(self, store: KnowledgeStore, requirement: Requirement) -> None:
        rejected = store.add_chunk("kiwi asof rejected later", "fact", "extracted")
        superseded = store.add_chunk("kiwi asof superseded later", "fact", "operator")
        invalidated = store.add_chunk("kiwi asof invalidated later", "fact", "operator")
        confirmed = store.add_chunk("kiwi asof confirmed later", "fact", "extracted")
        position = _history_of(store, requirement).history_position()
        store.set_review_state(rejected, "rejected")
        successor = store.supersede(superseded, "kiwi asof the successor")
        store.invalidate_chunk(invalidated, reason="later found wrong")
        store.set_review_state(confirmed, "confirmed")
        then = {rejected, superseded, invalidated, confirmed}
        with _as_of(store, position, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == then,
                "as of the position before the changes list_chunks(deliverable=True) returned "
                f"{sorted(listed)}; "
                f"expected {sorted(then)} (rejected, superseded and invalidated only afterwards)",
            )
            found = {h.chunk.id for h in view.search("kiwi asof", 50)}
            requirement.check(
                found == then, f"as-of search('kiwi asof') returned {sorted(found)}, expected {sorted(then)}"
            )
            old = view.get(superseded)
            requirement.check(
                old is not None and old.invalidated_at is None and old.superseded_by is None,
                f"as-of get({superseded!r}) reads {old!r}; it was not superseded then",
            )
            pending = view.get(confirmed)
            requirement.check(
                pending is not None and pending.review_state == "pending",
                f"as-of get({confirmed!r}) has review_state {getattr(pending, 'review_state', None)!r}; "
                "it was confirmed only after the position",
            )
            gone = view.get(rejected)
            requirement.check(
                gone is not None and gone.review_state == "pending",
                f"as-of get({rejected!r}) has review_state {getattr(gone, 'review_state', None)!r}, "
                "not 'pending'",
            )
            requirement.check(
                successor not in listed,
                f"the successor {successor!r} written later is listed as of before it",
            )
        now = _ids(store.list_chunks(deliverable=True))
        requirement.check(
            now == {confirmed, successor},
            f"the live store lists {sorted(now)} after the changes; "
            f"expected {sorted({confirmed, successor})}",
        )

    @checks("STORE-ASOF-MEMBERSHIP")
    def test_store_asof_membership(self, store: KnowledgeStore, requirement: Requirement) -> None:
        early = store.add_chunk("kiwi member early", "fact", "operator")
        position = _history_of(store, requirement).history_position()
        late = store.add_chunk("kiwi member late", "fact", "operator")
        late_rejected = store.add_chunk(
            "kiwi member late rejected", "fact", "extracted", review_state="rejected"
        )
        with _as_of(store, position, requirement) as view:
            for cid in (late, late_rejected):
                requirement.check(
                    view.get(cid) is None, f"as-of get({cid!r}) returned a row written after the position"
                )
            every = _ids(view.list_chunks())
            requirement.check(
                every == {early}, f"as-of list_chunks() returned {sorted(every)}, expected [{early!r}]"
            )
            hits = {h.chunk.id for h in view.search("kiwi member", 50, deliverable=False)}
            requirement.check(
                hits == {early},
                f"as-of search(deliverable=False) returned {sorted(hits)}, expected [{early!r}]",
            )

    @checks("STORE-ASOF-EXPIRY")
    def test_store_asof_expiry(self, store: KnowledgeStore, requirement: Requirement) -> None:
        soon = datetime.now(UTC) + timedelta(seconds=2)
        fleeting = store.add_chunk("kiwi expiry fleeting", "fact", "operator", expires_at=soon)
        moved = store.add_chunk("kiwi expiry moved", "fact", "operator")
        cleared = store.add_chunk("kiwi expiry cleared", "fact", "operator", expires_at=soon)
        position = _history_of(store, requirement).history_position()
        store.set_expires_at(moved, datetime.now(UTC) - timedelta(hours=1))
        store.set_expires_at(cleared, None)
        later = soon + timedelta(days=1)
        now = _ids(store.list_chunks(deliverable=True, now=later))
        requirement.check(
            now == {cleared}, f"the live store at a later time lists {sorted(now)}, expected [{cleared!r}]"
        )
        with _as_of(store, position, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == {fleeting, moved, cleared},
                f"as of the position (before {soon.isoformat()}) list_chunks(deliverable=True) returned "
                f"{sorted(listed)}; every row was deliverable then",
            )
            row = view.get(cleared)
            requirement.check(
                row is not None and row.expires_at == soon,
                f"as-of get({cleared!r}) has expires_at {getattr(row, 'expires_at', None)!r}; "
                f"it was {soon!r} then",
            )
            found = {h.chunk.id for h in view.search("kiwi expiry", 50)}
            requirement.check(found == {fleeting, moved, cleared}, f"as-of search returned {sorted(found)}")

    @checks("STORE-ASOF-REPLAY")
    def test_store_asof_replay(self, store: KnowledgeStore, requirement: Requirement) -> None:
        rows = [
            store.add_chunk(f"kiwi replay {word}", "fact", src)
            for word, src in (
                ("alpha", "operator"),
                ("beta", "extracted"),
                ("gamma", "operator"),
                ("delta", "ingest"),
            )
        ]
        store.set_review_state(rows[1], "confirmed")
        opener = getattr(store, "consistent_read", None)
        requirement.check(callable(opener), f"{type(store).__name__} has no consistent_read()")
        with store.consistent_read() as seen:  # type: ignore[attr-defined]
            position_of = getattr(seen, "history_position", None)
            requirement.check(callable(position_of), "the consistent_read() view has no history_position()")
            position = seen.history_position()
            then_list = [c.id for c in seen.list_chunks(deliverable=True)]
            then_hits = [(h.chunk.id, h.rank) for h in seen.search("kiwi replay gamma", 10)]
            then_row = seen.get(rows[1])
        store.set_review_state(rows[0], "rejected")
        store.supersede(rows[2], "kiwi replay gamma again")
        store.add_chunk("kiwi replay gamma gamma gamma", "fact", "operator")
        store.set_expires_at(rows[3], datetime.now(UTC) - timedelta(minutes=1))
        with _as_of(store, position, requirement) as view:
            again_list = [c.id for c in view.list_chunks(deliverable=True)]
            again_hits = [(h.chunk.id, h.rank) for h in view.search("kiwi replay gamma", 10)]
            again_row = view.get(rows[1])
            requirement.check(
                again_list == then_list,
                f"as of the recorded position list_chunks(deliverable=True) gives {again_list}; "
                "the consistent "
                f"view gave {then_list}",
            )
            requirement.check(
                again_hits == then_hits,
                f"as of the recorded position search gives {again_hits}; "
                f"the consistent view gave {then_hits}",
            )
            requirement.check(
                again_row == then_row, f"as-of get({rows[1]!r}) reads {again_row!r}, then {then_row!r}"
            )
            inner = getattr(view, "history_position", None)
            requirement.check(
                callable(inner) and view.history_position() == position,
                "the as-of view does not report the position it was opened at",
            )

    @checks("STORE-ASOF-TIME")
    def test_store_asof_time(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("kiwi clock first", "fact", "extracted")
        _pause()
        moment = datetime.now(UTC)
        _pause()
        store.set_review_state(first, "rejected")
        second = store.add_chunk("kiwi clock second", "fact", "operator")
        with _as_of(store, moment, requirement) as view:
            listed = _ids(view.list_chunks(deliverable=True))
            requirement.check(
                listed == {first},
                f"as_of(<time between the writes>) lists {sorted(listed)} as deliverable; "
                f"expected [{first!r}] "
                f"(rejected and {second!r} came later)",
            )
        try:
            with _as_of(store, moment.replace(tzinfo=None), requirement):
                pass
        except Exception as exc:
            requirement.check(
                "timezone" in str(exc) or "aware" in str(exc),
                f"as_of(<naive time>) raised {type(exc).__name__}: {exc}; "
                "the message must say it needs an aware time",
            )
        else:
            requirement.fail("as_of(<naive datetime>) was accepted; a time without a timezone is ambiguous")
