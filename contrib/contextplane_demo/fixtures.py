"""What the demo runs on: the persona, the skills catalogue, the seeded rows and the config.

The sample holds every kind of row the delivery rules must handle (operator facts, ingested
references, agent notes pending review, a superseded fact and its replacement, an expired
row, a rejected row, rows in another project's scope, an on-demand row) and prior-session
summaries, including the active session's own, which must never show as a prior session.
"""

from __future__ import annotations

import datetime as dt
import tomllib
from pathlib import Path

import attrs
import yaml

from contextplane import Config, KnowledgeStore, SessionSummaries
from contextplane.config import structure

PROJECT = "website"
SESSION = "demo-session-7"

SOUL = """\
You are Ferris, the operations agent for the Acme web platform team.
You are careful with production, terse in chat and thorough in writing."""

#: More skills than a small model's budget holds, so the skills index degrades to names.
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
class Seeded:
    """Ids of the rows the checks need to know about."""

    never_deliverable: dict[str, str]
    replacement_id: str


def write_fixture_files(root: Path) -> None:
    """The configuration (``contextplane.toml``), SOUL.md and one SKILL.md per topic under
    ``root``, plus one malformed SKILL.md (which the skills section must skip with one warning
    naming it)."""
    (root / "contextplane.toml").write_text(DEMO_TOML, encoding="utf-8")
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
    bad = skills / "half-written-on-purpose"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "SKILL.md").write_text("# no front matter here\n", encoding="utf-8")


def seed(store: KnowledgeStore, summaries: SessionSummaries) -> Seeded:
    """Write the sample: every kind of row the delivery rules must handle, and the summaries."""
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


#: The first line of the ``contextplane.toml`` the demo writes: how a later run knows the
#: directory is a demo's (and may start it over) and not someone's own store.
CONFIG_MARKER = "# written by `contextplane demo`"

#: The demo's configuration, written to ``<dir>/contextplane.toml`` and read back from there,
#: so what the demo ran with is what a later command on its store runs with (``--config``).
DEMO_TOML = f"""{CONFIG_MARKER}: the configuration its session ran with.
# Commands on the demo's store: contextplane <command> --config <dir>/contextplane.toml

[context]
budget_pct = 8
project = "{PROJECT}"
prior_sessions = "newest"
retrieved_max = 8

[store]
path = "memory.sqlite3"

[prompt]
soul_path = "SOUL.md"
guidelines = "- Link the ticket in every status update."

[skills]
dir = "skills"

[[subagents]]
name = "researcher"
description = "Reads docs and tickets; answers with sources."

[[subagents]]
name = "release-captain"
description = "Runs canaries and deploys."

[[subagents]]
name = "billing-auditor"
description = "Internal only."
visible_to_lead = false
"""


def demo_config(root: Path) -> Config:
    """The demo's configuration (``DEMO_TOML``), its paths relative to ``root``: the store in
    ``root``, 8% budget, the newest-first digest."""
    return structure(tomllib.loads(DEMO_TOML), origin="demo", base_dir=str(root))
