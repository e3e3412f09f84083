"""``contextplane demo``: the main job on the embedded default, end to end, in seconds.

It creates a local SQLite store in a fresh directory, seeds it with a realistic sample (every
kind of row the delivery rules must handle), runs a scripted multi-turn session through
``compose_projected_context`` with the standard sections, prints each turn's budget table and
ends with checks that hold the ADR's promises: within budget on every turn, no
non-deliverable row ever delivered, incognito and goal turns suppressed what they must.
The checks are computed from what was composed and logged, not asserted by construction.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import yaml

from contextplane.authority import build_stable_prefix
from contextplane.config import Config, structure
from contextplane.plugins import PluginHost
from contextplane.projection import ProjectedContext, compose_projected_context
from contextplane.request import BuildContext

PROJECT = "website"
SESSION = "demo-session-7"

SOUL = """\
You are Ferris, the operations agent for the Acme web platform team.
You are careful with production, terse in chat and thorough in writing."""

SKILL_TOPICS = [
    "deploy",
    "rollback",
    "canary",
    "feature-flags",
    "incident",
    "postmortem",
    "oncall",
    "pager",
    "dns",
    "tls-certs",
    "cdn-purge",
    "cache-warm",
    "db-migrate",
    "db-backup",
    "db-restore",
    "replica-lag",
    "queue-drain",
    "cron-audit",
    "cost-report",
    "capacity",
    "load-test",
    "perf-profile",
    "log-search",
    "trace-search",
    "alert-tune",
    "slo-report",
    "runbook-edit",
    "access-review",
    "secrets-rotate",
    "vuln-scan",
    "dependency-bump",
    "release-notes",
    "changelog",
    "status-page",
    "customer-comms",
    "ticket-triage",
    "sprint-report",
    "docs-publish",
    "api-diff",
    "schema-lint",
    "k8s-scale",
    "k8s-logs",
    "node-drain",
    "image-build",
    "artifact-prune",
    "terraform-plan",
    "terraform-apply",
    "vpn-check",
    "backup-verify",
    "email-bounce",
    "search-reindex",
    "sitemap",
    "seo-audit",
    "a11y-audit",
    "uptime-check",
    "cert-expiry",
    "quota-check",
    "billing-sync",
    "gdpr-export",
    "gdpr-delete",
    "audit-log",
    "mfa-reset",
    "sso-debug",
    "webhook-replay",
    "rate-limit",
    "abuse-block",
    "bot-filter",
    "ab-test",
    "analytics-export",
    "metrics-backfill",
    "etl-rerun",
    "data-quality",
    "pii-scan",
    "archive-logs",
    "cold-storage",
    "disaster-drill",
    "chaos-test",
    "game-day",
    "handover",
    "standup-notes",
    "retro-notes",
    "hiring-loop",
    "interview-kit",
    "onboarding",
    "offboarding",
    "laptop-setup",
    "license-audit",
    "vendor-review",
    "budget-plan",
]


@attrs.frozen
class Turn:
    label: str
    query: str
    state: dict[str, Any] = attrs.field(factory=dict)
    incognito: bool = False
    goal_turn: bool = False
    context_window: int = 200_000


TURNS = [
    Turn(
        "1 native",
        "When is the website deploy window, and who approves a deploy?",
        {
            "goal": "Ship the checkout redesign",
            "status": "in progress",
            "plan": [
                "Freeze the feature branch",
                {"title": "Run the canary", "done": False},
                "Deploy in the Tuesday window",
            ],
            "tasks": ["Ask Priya to approve the deploy", "Update the status page"],
        },
    ),
    Turn(
        "2 native",
        "Which database migration tool did we settle on?",
        {
            "goal": "Ship the checkout redesign",
            "status": "canary running",
            "tasks": ["Check replica lag during the canary"],
            "watches": ["p95 checkout latency < 400 ms"],
        },
    ),
    Turn(
        "3 incognito",
        "Draft a private note about my own salary negotiation.",
        {"goal": "Private note"},
        incognito=True,
    ),
    Turn(
        "4 goal turn",
        "Continue the goal: finish the canary and deploy.",
        {
            "goal": "Ship the checkout redesign",
            "status": "canary green",
            "schedules": [{"title": "Deploy window", "when": "Tuesday 14:00 UTC"}],
        },
        goal_turn=True,
    ),
    Turn(
        "5 small model",
        "When is the website deploy window?",
        {"goal": "Ship the checkout redesign", "status": "deploying"},
        context_window=16_000,
    ),
    Turn("6 native", "What is the payments API key rotation policy?", {"goal": "Security review"}),
]


@attrs.frozen
class Seeded:
    """Ids of the rows the checks need to know about."""

    never_deliverable: dict[str, str]
    replacement_id: str


def write_fixture_files(root: Path) -> None:
    (root / "SOUL.md").write_text(SOUL + "\n", encoding="utf-8")
    skills = root / "skills"
    for topic in SKILL_TOPICS:
        d = skills / topic
        d.mkdir(parents=True, exist_ok=True)
        desc = (
            f"Use when a task involves {topic.replace('-', ' ')}: gathers the current state, proposes the "
            f"safe sequence of steps for {topic}, and records what was done in the runbook and the ticket."
        )
        front = yaml.safe_dump({"name": topic, "description": desc}, sort_keys=False, width=1000)
        (d / "SKILL.md").write_text(f"---\n{front}---\n\n# {topic}\n", encoding="utf-8")
    bad = skills / "half-written"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "SKILL.md").write_text("# no front matter here\n", encoding="utf-8")


def seed(store: Any, summaries: Any) -> Seeded:
    now = dt.datetime.now(dt.UTC)
    proj = f"project:{PROJECT}"
    add = store.add_chunk
    # Operator facts and preferences (tier 3, confirmed); the "hot" ones are always-on.
    add(
        "The website deploy window is Tuesday 14:00-16:00 UTC; never deploy on Fridays.",
        domain="hot",
        source_type="operator",
        memory_kind="standing",
        namespace=proj,
        subject="deploys",
    )
    add(
        "Priya Raman approves production deploys for the website.",
        domain="fact",
        source_type="operator",
        namespace=proj,
        subject="deploys",
    )
    add(
        "The operator prefers short status updates with a link to the ticket.",
        domain="preferences",
        source_type="operator",
    )
    # Ingested reference documents (tier 1, pending review).
    add(
        "Runbook excerpt: a website deploy runs the canary for 30 minutes before the full rollout.",
        source_type="ingest",
        memory_kind="reference",
        namespace=proj,
        source="runbook.md",
    )
    add(
        "Vendor doc: the CDN purge API is rate-limited to 10 requests per minute.",
        source_type="ingest",
        memory_kind="reference",
        source="cdn-vendor.pdf",
    )
    # Agent notes pending review (tier 2).
    add(
        "Deploys that skip the canary caused two incidents last quarter.",
        domain="finding",
        source_type="extracted",
        namespace=proj,
    )
    add(
        "Replica lag spikes during large migrations; watch it during the canary.",
        source_type="conversation",
        memory_kind="note",
        namespace=proj,
    )
    # A superseded fact and its replacement.
    old = add(
        "The database migration tool is Flyway.",
        domain="fact",
        source_type="operator",
        namespace=proj,
        subject="db-migration",
    )
    new = store.supersede(
        old,
        "The database migration tool is Alembic (we moved off Flyway in March).",
        source_type="operator",
        domain="fact",
        memory_kind="decision",
        namespace=proj,
        subject="db-migration",
    )
    # An expired row and a rejected row.
    expired = add(
        "Temporary: the deploy window moved to Wednesday this week only.",
        source_type="operator",
        namespace=proj,
        expires_in_days=1,
    )
    store.set_expires_at(expired, now - dt.timedelta(hours=1))
    rejected = add(
        "The deploy window is any time on Friday evening.", source_type="extracted", namespace=proj
    )
    store.set_review_state(rejected, "rejected")
    # Rows in another project's scope.
    other = add(
        "Payments API keys rotate every 30 days; the deploy window for payments is Monday.",
        domain="fact",
        source_type="operator",
        namespace="project:payments",
    )
    other_hot = add(
        "Payments standing rule: page the payments on-call before any deploy.",
        domain="hot",
        source_type="operator",
        namespace="project:payments",
    )
    # An on-demand row: reachable by the memory tool only, never injected.
    on_demand = add(
        "The website deploy window runbook archive lives in the wiki (on demand only).",
        source_type="operator",
        delivery_policy="on_demand",
        namespace=proj,
    )
    # Prior-session summaries, including the active session's own (which must never show).
    for i, (sid, topic, text) in enumerate(
        [
            ("demo-session-1", "deploys", "Agreed the Tuesday deploy window and the 30-minute canary."),
            ("demo-session-2", "database", "Chose Alembic over Flyway for database migrations."),
            ("demo-session-3", "incident", "Post-mortem of the checkout outage; action items filed."),
            ("demo-session-4", "cdn", "Tuned CDN purge batching to stay under the rate limit."),
            ("demo-session-5", "hiring", "Drafted the interview loop for the SRE opening."),
            (SESSION, "deploys", "THIS IS THE ACTIVE SESSION AND MUST NOT APPEAR AS PRIOR."),
        ]
    ):
        at = (now - dt.timedelta(days=10 - i)).isoformat(timespec="seconds")
        summaries.add(sid, text, topic=topic, at=at)
    return Seeded(
        never_deliverable={
            old: "superseded",
            expired: "expired",
            rejected: "rejected",
            other: "other project",
            other_hot: "other project (always-on)",
            on_demand: "on_demand",
        },
        replacement_id=new,
    )


def demo_config(root: Path) -> Config:
    return structure(
        {
            "context": {"budget_pct": 8, "project": PROJECT, "prior_sessions": "newest", "retrieved_k": 8},
            "store": {"path": str(root / "memory.sqlite3")},
            "prompt": {"soul_path": "SOUL.md", "guidelines": "- Link the ticket in every status update."},
            "skills": {"dir": "skills"},
            "subagents": [
                {"name": "researcher", "description": "Reads docs and tickets; answers with sources."},
                {"name": "release-captain", "description": "Runs canaries and deploys."},
                {"name": "billing-auditor", "description": "Internal only.", "visible_to_lead": False},
            ],
        },
        origin="demo",
        base_dir=str(root),
    )


@attrs.frozen
class DemoResult:
    projections: tuple[tuple[Turn, ProjectedContext], ...]
    checks: tuple[tuple[str, bool, str], ...]
    directory: str

    @property
    def ok(self) -> bool:
        return all(ok for _, ok, _ in self.checks)


def run_demo(directory: str | Path | None = None, echo: Callable[[str], None] = print) -> DemoResult:
    """Run the scripted session; returns what was composed and the checks."""
    from contextplane.cli import budget_table
    from contextplane.defaults import open_knowledge_store
    from contextplane_sections.injection_log import log_at
    from contextplane_sections.prior_sessions import clear_cache
    from contextplane_sections.session_summaries import summaries_at

    root = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="contextplane-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    write_fixture_files(root)
    config = demo_config(root)
    host = PluginHost.from_entry_points(config)
    store = open_knowledge_store(host)
    summaries = summaries_at(store.path)
    clear_cache()
    seeded = seed(store, summaries)
    tools = ("search_memory", "deploy", "read_ticket")
    prefix = build_stable_prefix(host, BuildContext(config=config, tools=tools))
    echo(f"contextplane demo: store {store.path}")
    echo(f"stable prefix: {len(prefix.text)} chars, sections {', '.join(prefix.order)}")
    log = log_at(store.path)
    log_before = len(log.rows(SESSION))

    results: list[tuple[Turn, ProjectedContext]] = []
    for index, turn in enumerate(TURNS, start=1):
        projection = compose_projected_context(
            turn.query,
            store,
            None,
            turn.state,
            incognito=turn.incognito,
            goal_turn=turn.goal_turn,
            session_id=SESSION,
            turn_index=index,
            context_window=turn.context_window,
            host=host,
        )
        results.append((turn, projection))
        echo(f"\n== turn {turn.label}: {turn.query!r} (window {turn.context_window} tokens) ==")
        echo(budget_table(projection))
        for step in projection.overflow:
            echo(f"  shed: {step.section} {step.action} x{step.items} ({step.chars} chars)")

    checks: list[tuple[str, bool, str]] = []
    over = [t.label for t, p in results if not p.within_budget]
    checks.append(
        ("projected context within budget on every turn", not over, f"over on: {over}" if over else "")
    )
    leaked = sorted(
        f"{rid} ({why}) in turn {t.label}"
        for t, p in results
        for ids in p.delivered_ids.values()
        for rid in ids
        if (why := seeded.never_deliverable.get(rid))
    )
    texts = "\n".join(p.text for _, p in results)
    leaked += [
        f"text of a {why} row" for rid, why in seeded.never_deliverable.items() if f"[{rid} |" in texts
    ]
    if "MUST NOT APPEAR AS PRIOR" in texts:
        leaked.append("the active session's own summary")
    checks.append(("non-deliverable rows never delivered", not leaked, "; ".join(leaked)))
    delivered_new = any(seeded.replacement_id in ids for _, p in results for ids in p.delivered_ids.values())
    checks.append(("the replacement of the superseded fact is delivered", delivered_new, ""))
    memory_sections = {"always_on", "prior_sessions", "retrieved"}
    inc = [p for t, p in results if t.incognito]
    inc_ok = all(
        not any(s.item_ids for s in p.sections if s.name in memory_sections)
        and all(p.section(n) is None or p.section(n).suppressed == "incognito" for n in memory_sections)  # type: ignore[union-attr]
        and "<injected_memory>" not in p.text
        for p in inc
    )
    rows = log.rows(SESSION)[log_before:]
    logged_turns = [r.turn_index for r in rows]
    expected_turns = [i for i, (t, _) in enumerate(results, start=1) if not t.incognito]
    checks.append(
        (
            "incognito: no memory sections and no injection-log row",
            inc_ok and logged_turns == expected_turns,
            f"logged turns {logged_turns}, expected {expected_turns}",
        )
    )
    goal = [p for t, p in results if t.goal_turn]
    goal_ok = all(
        p.section("prior_sessions") is not None
        and p.section("prior_sessions").suppressed == "goal_turn"  # type: ignore[union-attr]
        and "<prior_sessions>" not in p.text
        for p in goal
    )
    checks.append(("goal turn: no prior-session digest", goal_ok, ""))
    logged_match = all(
        r.delivered == {k: list(v) for k, v in p.delivered_ids.items()}
        for r, (_, p) in zip(rows, [x for x in results if not x[0].incognito], strict=False)
    )
    checks.append(
        ("injection log ids equal the delivered ids", logged_match and len(rows) == len(expected_turns), "")
    )
    shed_turn = [p for t, p in results if t.context_window < 50_000]
    checks.append(("the small-model turn shed under pressure", all(p.overflow for p in shed_turn), ""))

    echo("\n== summary ==")
    for name, ok, detail in checks:
        echo(f"[{'ok' if ok else 'FAIL'}] {name}" + (f": {detail}" if detail and not ok else ""))
    return DemoResult(tuple(results), tuple(checks), str(root))
