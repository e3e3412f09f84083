"""Consolidation on write (ADR D7): an exact duplicate is not stored again, a row naming the
subject of one in its scope and kind supersedes it, near duplicates are reported, and racing
writers end in one chain.

Why its own module: these checks write sequences and races, not single rows, and read the
``WriteOutcome`` each write returns.
"""

from __future__ import annotations

import threading
from typing import Any

from contextplane.errors import StoreError
from contextplane.store.protocol import KnowledgeStore
from contextplane.testing._base import checks
from contextplane.testing.requirements import Requirement
from contextplane.testing.stores.common import RACING_PAIRS, _history_of, _ids, _StoreBase


def _outcome(written: str) -> tuple[Any, ...]:
    """What a write said it did: (id, outcome, duplicate_of, superseded, near_duplicates)."""
    return (
        str(written),
        getattr(written, "outcome", None),
        getattr(written, "duplicate_of", None),
        tuple(getattr(written, "superseded", ()) or ()),
        tuple(getattr(written, "near_duplicates", ()) or ()),
    )


class StoreConsolidationChecks(_StoreBase):
    """Consolidation on write (ADR D7): duplicates, same-subject supersession, near duplicates."""

    @checks("STORE-CONSOLIDATE-DUPLICATE")
    def test_store_consolidate_duplicate(self, store: KnowledgeStore, requirement: Requirement) -> None:
        first = store.add_chunk("kiwi dup orchard  north\tfield", "fact", "operator", namespace="project:a")
        again = store.add_chunk("kiwi dup orchard north field ", "fact", "operator", namespace="project:a")
        got = _outcome(again)
        requirement.check(
            got[:3] == (first, "duplicate", first),
            f"writing {first!r}'s text again (whitespace aside) returned (id, outcome, duplicate_of) "
            f"{got[:3]}; expected ({first!r}, 'duplicate', {first!r})",
        )
        others = {
            "another scope": store.add_chunk(
                "kiwi dup orchard north field", "fact", "operator", namespace="project:b"
            ),
            "another provenance": store.add_chunk(
                "kiwi dup orchard north field", "fact", "extracted", namespace="project:a"
            ),
            "another case": store.add_chunk(
                "Kiwi dup orchard north field", "fact", "operator", namespace="project:a"
            ),
        }
        for what, written in others.items():
            requirement.check(
                str(written) != first and _outcome(written)[1] != "duplicate",
                f"the same text from {what} returned {_outcome(written)[:3]}; it is a new row, not "
                f"a duplicate of {first!r}",
            )
        store.set_review_state(first, "rejected")
        revived = store.add_chunk("kiwi dup orchard north field", "fact", "operator", namespace="project:a")
        requirement.check(
            str(revived) != first and _outcome(revived)[1] != "duplicate",
            f"copying the rejected row {first!r} returned {_outcome(revived)[:3]}; only a deliverable "
            "row absorbs copies",
        )
        ids = [str(i) for i in _ids(store.list_chunks())]
        requirement.check(
            len(ids) == 5 and first in ids and str(revived) in ids,
            f"list_chunks() holds {sorted(ids)} after six writes, one a duplicate; expected 5 rows",
        )
        batch = store.add_chunks(
            [
                {"content": "kiwi batch twin", "domain": "fact", "source_type": "operator"},
                {"content": "kiwi  batch twin", "domain": "fact", "source_type": "operator"},
                {"content": "kiwi batch other", "domain": "fact", "source_type": "operator"},
            ]
        )
        requirement.check(
            len(batch) == 3 and batch[0] == batch[1] != batch[2] and _outcome(batch[1])[1] == "duplicate",
            f"add_chunks with two copies of one text returned {[_outcome(b)[:2] for b in batch]}; the "
            "copy must return the first row's id, with outcome 'duplicate'",
        )

    @checks("STORE-CONSOLIDATE-OUTDATED")
    def test_store_consolidate_outdated(self, store: KnowledgeStore, requirement: Requirement) -> None:
        old = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:a")
        middle = store.supersede(old, "kiwi window is Wednesday", source_type="operator")
        head = store.supersede(middle, "kiwi window is Thursday", source_type="operator")
        again = store.add_chunk("kiwi window is  Tuesday", "fact", "operator", namespace="project:a")
        got = _outcome(again)
        requirement.check(
            got[:3] == (str(head), "outdated", old),
            f"writing the text of {old!r} (superseded by {middle!r}, then by {head!r}) again returned "
            f"(id, outcome, duplicate_of) {got[:3]}; expected ({str(head)!r}, 'outdated', {old!r}): "
            "storing it would deliver two rows that contradict each other",
        )
        live = [c.id for c in store.list_chunks(deliverable=True, namespace="project:a")]
        requirement.check(
            live == [str(head)],
            f"after the write the deliverable rows of the scope are {live}; "
            f"expected only the head {str(head)!r}",
        )
        elsewhere = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:b")
        requirement.check(
            str(elsewhere) not in (old, str(head)) and _outcome(elsewhere)[1] != "outdated",
            f"the same text in another scope returned {_outcome(elsewhere)[:3]}; it is a new row",
        )
        store.set_review_state(str(head), "rejected")
        revived = store.add_chunk("kiwi window is Tuesday", "fact", "operator", namespace="project:a")
        requirement.check(
            str(revived) not in (old, str(middle), str(head))
            and _outcome(revived)[1] not in ("outdated", "duplicate"),
            f"with the head {str(head)!r} rejected, writing {old!r}'s text returned {_outcome(revived)[:3]}; "
            "nothing contradicts it any more, so it is stored",
        )

    @checks("STORE-CONSOLIDATE-SUBJECT")
    def test_store_consolidate_subject(self, store: KnowledgeStore, requirement: Requirement) -> None:
        def tool(text: str, **kw: Any) -> str:
            return store.add_chunk(text, "fact", "operator", subject="deploy-tool", **kw)

        old = tool("The deploy tool is Jenkins", namespace="project:a")
        elsewhere = tool("The deploy tool is Bamboo", namespace="project:b")
        decision = tool("We decided to keep Jenkins", namespace="project:a", memory_kind="decision")
        new = tool("The deploy tool is Argo", namespace="project:a")
        got = _outcome(new)
        requirement.check(
            got[0] != old and got[1] == "superseded" and got[3] == (old,),
            f"a write naming {old!r}'s subject in its scope and kind returned (id, outcome, superseded) "
            f"{(got[0], got[1], got[3])}; expected a new id, 'superseded', ({old!r},)",
        )
        kept = store.get(old)
        requirement.check(
            kept is not None and kept.superseded_by == str(new) and not kept.is_deliverable(),
            f"after the same-subject write get({old!r}) reads {kept!r}; it must be kept, invalidated "
            f"with superseded_by {str(new)!r}",
        )
        for what, other in (("another scope", elsewhere), ("another kind", decision)):
            row = store.get(other)
            requirement.check(
                row is not None and row.is_deliverable(),
                f"the row with the same subject in {what} ({other!r}) reads {row!r}; it must be left alone",
            )
        chain = store.add_chunks(
            [
                {
                    "content": f"Releases go out on {day}",
                    "domain": "fact",
                    "source_type": "operator",
                    "subject": "release-day",
                    "namespace": "project:a",
                }
                for day in ("Monday", "Wednesday", "Friday")
            ]
        )
        links = [getattr(store.get(c), "superseded_by", "missing") for c in chain]
        requirement.check(
            links == [str(chain[1]), str(chain[2]), None],
            f"add_chunks naming subject 'release-day' three times left superseded_by links {links}; "
            f"expected [{chain[1]!r}, {chain[2]!r}, None] (a linear chain)",
        )
        heads = [
            c.id
            for c in store.list_chunks(deliverable=True, namespace="project:a")
            if c.subject == "release-day"
        ]
        requirement.check(heads == [str(chain[2])], f"deliverable rows of the subject are {heads}")
        said = [_outcome(c)[1:4:2] for c in chain]
        requirement.check(
            said == [(None, ()), ("superseded", (str(chain[0]),)), ("superseded", (str(chain[1]),))]
            or said == [("stored", ()), ("superseded", (str(chain[0]),)), ("superseded", (str(chain[1]),))],
            f"the batch's outcomes (outcome, superseded) were {said}",
        )

    @checks("STORE-CONSOLIDATE-NEAR")
    def test_store_consolidate_near(self, store: KnowledgeStore, requirement: Requirement) -> None:
        base = store.add_chunk(
            "Kiwi orchard north field harvest starts in early May every year",
            "fact",
            "operator",
            namespace="project:a",
        )
        store.add_chunk("kiwi orchard pruning happens in winter", "fact", "operator", namespace="project:a")
        store.add_chunk(
            "kiwi orchard north field harvest starts in early May each year",
            "fact",
            "operator",
            namespace="project:b",
        )
        # 10 shared words of 12 in either: Jaccard 0.833, at or above 0.8
        near = store.add_chunk(
            "kiwi orchard north field harvest starts in early May each year",
            "fact",
            "operator",
            namespace="project:a",
        )
        got = _outcome(near)
        pairs = [(str(i), float(v)) for i, v in got[4]]
        requirement.check(
            got[0] != base and got[1] == "near_duplicate" and [i for i, _ in pairs] == [base],
            f"a write sharing 10 of 12 words with {base!r} returned (id, outcome, near_duplicates) "
            f"{(got[0], got[1], got[4])}; expected a new id, 'near_duplicate', [({base!r}, 0.83)]",
        )
        requirement.check(
            all(abs(v - 10 / 12) < 0.01 for _, v in pairs),
            f"the reported similarity is {pairs}; the Jaccard index of the two word sets is 10/12",
        )
        both = _ids(store.list_chunks(deliverable=True, namespace="project:a"))
        requirement.check(
            {base, str(near)} <= both, f"deliverable rows of the scope are {sorted(both)}: nothing is merged"
        )
        apart = store.add_chunk("kiwi orchard north field notes", "fact", "operator", namespace="project:a")
        requirement.check(
            _outcome(apart)[1] in (None, "stored"),
            f"a write sharing 5 of 13 words returned outcome {_outcome(apart)[1]!r} "
            f"with {_outcome(apart)[4]}; below the threshold it is simply stored",
        )

    @checks("STORE-CONSOLIDATE-HISTORY")
    def test_store_consolidate_history(self, store: KnowledgeStore, requirement: Requirement) -> None:
        history = _history_of(store, requirement)
        first = store.add_chunk("kiwi history dup", "fact", "operator")
        store.add_chunk("kiwi history dup", "fact", "operator")
        events = [e.event for e in history.history(first)]
        requirement.check(
            events == ["created", "consolidated"],
            f"history({first!r}) after a duplicate write reads {events}; "
            "expected ['created', 'consolidated']",
        )
        old = store.add_chunk("Standup is at 9:30", "fact", "operator", subject="standup")
        new = store.add_chunk("Standup moved to 10:00", "fact", "operator", subject="standup")
        created = history.history(str(new))[:1]
        requirement.check(
            [(e.event, e.detail.get("outcome")) for e in created] == [("created", "superseded")],
            f"the superseding row's first event is {[(e.event, dict(e.detail)) for e in created]}; expected "
            "'created' with outcome 'superseded' in its detail",
        )
        last = history.history(old)[-1]
        requirement.check(
            (last.event, last.superseded_by) == ("superseded", str(new)),
            f"history({old!r}) ends with {(last.event, last.superseded_by)}; "
            f"expected ('superseded', {new!r})",
        )
        base = store.add_chunk(
            "the kiwi crates are stacked by the north gate every evening", "fact", "operator"
        )
        near = store.add_chunk(
            "the kiwi crates are stacked by the north gate each evening", "fact", "operator"
        )
        detail = history.history(str(near))[0].detail
        listed = [str(pair[0]) for pair in detail.get("near_duplicates", ())]
        requirement.check(
            listed == [base],
            f"the near duplicate's created event has detail {dict(detail)}; "
            f"its near_duplicates must list {base!r}",
        )

    @checks("STORE-CONSOLIDATE-RACE")
    def test_store_consolidate_race(self, store: KnowledgeStore, requirement: Requirement) -> None:
        self._require(requirement)
        doubled: list[str] = []
        for n in range(RACING_PAIRS):
            subject, scope = f"racing-{n}", "project:race"
            head = store.add_chunk(f"kiwi race {n} v0", "fact", "operator", subject=subject, namespace=scope)
            start = threading.Barrier(2)
            errors: list[str] = []

            def supersede(head: str = str(head), n: int = n) -> None:
                start.wait()
                try:
                    store.supersede(head, f"kiwi race {n} superseded", source_type="operator")
                except StoreError:
                    pass  # the write came first and invalidated the head: the documented refusal
                except BaseException as exc:
                    errors.append(f"supersede raised {type(exc).__name__}: {exc}")

            def add(subject: str = subject, n: int = n) -> None:
                start.wait()
                try:
                    store.add_chunk(
                        f"kiwi race {n} added", "fact", "operator", subject=subject, namespace=scope
                    )
                except BaseException as exc:
                    errors.append(f"add_chunk raised {type(exc).__name__}: {exc}")

            racers = [threading.Thread(target=supersede), threading.Thread(target=add)]
            for t in racers:
                t.start()
            for t in racers:
                t.join(60)
            requirement.check(not errors, f"racing pair {n}: {errors}")
            rows = store.list_chunks(deliverable=True, namespace=scope)
            heads = sorted(c.id for c in rows if c.subject == subject)
            if len(heads) != 1:
                doubled.append(f"{subject}: {heads}")
        requirement.check(
            not doubled,
            f"{len(doubled)} of {RACING_PAIRS} subjects did not end with exactly one deliverable row after "
            f"a supersede and a same-subject add raced (subject: deliverable ids): {doubled[:3]}",
        )
