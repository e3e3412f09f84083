"""What must never cross a boundary: hostile text inside a row cannot close an envelope, forge a
tag or a role marker (CTX-NO-BREAKOUT); one session's rows never reach another; a section that
says it reads no memory reads none.

Why a group: each feeds the section data it must contain, not data it must fit; the patterns a
breakout would leave (role markers, instruction tokens, tags) are this module's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

import attrs

from contextplane.projection import ProjectedContext
from contextplane.testing._base import (
    KitUsageError,
    checks,
)
from contextplane.testing.context_checks.base import ContextSectionHarness, SpyStore, _ContextSectionBase
from contextplane.testing.inputs import PAYLOAD_MARKER, SectionInput, hostile_payload
from contextplane.testing.requirements import Requirement

_ROLE_AT_LINE_START = re.compile(r"^(?:system|assistant|user|human|developer|tool)\s*:", re.I | re.M)
_INSTRUCTION_TOKEN = re.compile(r"\[/?(?:INST|SYS|SYSTEM|ASSISTANT|USER)\]", re.I)
_TAG = re.compile(r"<[^<>]*>")


class ContextIsolationChecks(_ContextSectionBase):
    """What must never cross a boundary: memory into incognito, data out of its envelope, one
    session's rows into another's."""

    @checks("CTX-MEMORY-FLAG")
    def test_context_memory_flag(
        self, context: ContextSectionHarness, section_input: SectionInput, requirement: Requirement
    ) -> None:
        section, _host = context.section(section_input.config)
        if section.carries_memory:
            projection = context.compose(section_input, incognito=True)
            found = projection.section(section.name)
            requirement.check(
                found is not None and found.suppressed == "incognito" and not found.item_ids,
                f"{section.name!r} carries memory but delivered {found.item_ids if found else ()} under "
                "incognito",
            )
            return
        spy = SpyStore(section_input.knowledge_store)
        context.compose(section_input, store=spy)
        requirement.check(
            not spy.touched,
            f"{section.name!r} declares carries_memory=False but its draft read knowledge_store."
            f"{', knowledge_store.'.join(dict.fromkeys(spy.touched))}; an incognito turn would still "
            "deliver memory: declare carries_memory=True",
        )

    @checks("CTX-NO-BREAKOUT")
    def test_context_no_breakout(
        self,
        context: ContextSectionHarness,
        hostile_input: Callable[[str], SectionInput],
        section_input: SectionInput,
        requirement: Requirement,
    ) -> None:
        section, _host = context.section(section_input.config)
        tags = [section.envelope.tag] + ([section.inner_tag] if section.inner_tag else [])
        inp = hostile_input(hostile_payload(tags))
        # The hostile input may change the config (and so the registered section): use its host.
        section, host = context.section(inp.config)
        projection = context.compose(inp, host=host)
        report = context.report(projection, section, requirement)
        text = projection.text
        if not report.item_ids or PAYLOAD_MARKER not in text:
            raise KitUsageError(
                "hostile_input's text never reached the composed projection "
                f"(rows delivered: {len(report.item_ids)}); return an input that puts the given text into "
                "your section's rows, or this check proves nothing"
            )
        expected: Counter[str] = Counter()
        by_name = {r.section.name: r.section for r in host.context_sections()}
        for rep in projection.sections:
            sec = by_name.get(rep.name)
            if sec is None or not rep.chars:
                continue
            expected[f"<{sec.envelope.tag}>"] = 1
            expected[f"</{sec.envelope.tag}>"] = 1
            if sec.inner_tag:
                expected[f"<{sec.inner_tag}>"] += 1
                expected[f"</{sec.inner_tag}>"] += 1
        found = Counter(_TAG.findall(text))
        extra = found - expected
        requirement.check(
            not extra and found == expected and text.count("<") == sum(expected.values()),
            f"tags in the composed text that the layout did not put there: {sorted(extra)} "
            f"(expected exactly {sorted(expected)}); data reached trusted text (a heading, marker or "
            f"envelope built from data) unescaped. Composed text:\n{text}",
        )
        role = _ROLE_AT_LINE_START.search(text)
        requirement.check(
            role is None,
            f"a line of the composed text starts with the role marker {role.group(0) if role else ''!r}",
        )
        token = _INSTRUCTION_TOKEN.search(text)
        requirement.check(
            token is None,
            f"the composed text carries the chat-template token {token.group(0) if token else ''!r}",
        )

    @checks("CTX-SESSION-ISOLATION")
    def test_context_session_isolation(
        self,
        context: ContextSectionHarness,
        section_input: SectionInput,
        second_session_input: SectionInput,
        requirement: Requirement,
    ) -> None:
        if section_input.session_id == second_session_input.session_id:
            raise KitUsageError("second_session_input must use a different session_id from section_input")
        if second_session_input.config != section_input.config:
            raise KitUsageError(
                "second_session_input must use section_input's config: two sessions of one runtime share "
                "their configuration (vary the project, state, query or store contents instead)"
            )
        section, _ = context.section(section_input.config)
        host, _ = context.harness.host(section_input.config)
        a_name, b_name = section_input.session_id, second_session_input.session_id

        def seen(p: ProjectedContext) -> tuple[tuple[str, ...], str | None]:
            r = context.report(p, section, requirement)
            return r.item_ids, r.sha256

        a1 = seen(context.compose(section_input, host=host))
        b1 = seen(context.compose(second_session_input, host=host))
        a2 = seen(context.compose(section_input, host=host))
        requirement.check(
            a1 == a2,
            f"session {a_name!r} delivered {a1[0]} first and {a2[0]} after session {b_name!r} ran in "
            "between (same ids means the text changed)",
        )
        differs = attrs.evolve(second_session_input, session_id=a_name) != section_input
        requirement.check(
            not differs or a1 != b1,
            f"session {b_name!r} delivered exactly what session {a_name!r} did ({a1[0]}), though its input "
            "differs in more than the session id: the first session's rows leaked into the second (or "
            "second_session_input makes no difference to this section; make it one that does)",
        )
        b0 = seen(context.compose(second_session_input, host=context.harness.host(section_input.config)[0]))
        requirement.check(
            b0 == b1,
            f"session {b_name!r} delivered {b0[0]} in a fresh host but {b1[0]} after session {a_name!r} "
            "(same ids means the text changed)",
        )
