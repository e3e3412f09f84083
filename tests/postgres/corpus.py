"""A small memory corpus of one team's working notes, and questions about it (on and off corpus),
shared by the PostgreSQL relevance tests."""

from __future__ import annotations

NOTES: tuple[str, ...] = (
    "The deploy window for checkout is Tuesday 14:00 UTC.",
    "Deploys need two approvals from the on-call lead.",
    "Checkout latency budget is 300 ms at p95.",
    "The staging database is refreshed every Sunday night.",
    "Canary releases run for 30 minutes in one region before the fleet.",
    "The payments service retries webhooks three times with exponential backoff.",
    "Feature flags live in the flags repository and are reviewed weekly.",
    "The search cluster has six nodes and rebalances shards at night.",
    "Incident reviews are blameless and due within five working days.",
    "Alice owns the billing pipeline; Bob owns the invoice renderer.",
    "The mobile app release train leaves every second Thursday.",
    "Log retention is 30 days for application logs and one year for audit logs.",
    "The API gateway rate limit is 600 requests per minute per key.",
    "Backups are encrypted with the vault key and tested monthly.",
    "The design system uses an eight pixel spacing grid.",
    "Customer support escalations go to the tier two queue first.",
    "The data warehouse loads nightly from the event stream at 02:00 UTC.",
    "Kubernetes node pools autoscale between four and twenty nodes.",
    "On-call handover happens Monday at 09:00 local time.",
    "The onboarding checklist includes laptop setup and access requests.",
    "Terraform state is stored remotely with locking enabled.",
    "The recommendation model is retrained every Friday on last week's clicks.",
    "Error budgets reset at the start of each calendar month.",
    "The legacy reporting service is frozen; no new features are accepted.",
)
#: (question, the note that answers it, 1-based id in insertion order)
ON_CORPUS: tuple[tuple[str, int], ...] = (
    ("remind me when the deploy window for checkout is", 1),
    ("how many approvals does a deploy need?", 2),
    ("what is the latency budget for checkout at p95?", 3),
    ("how long do canary releases run before the fleet?", 5),
    ("what is the rate limit on the API gateway?", 13),
    ("who owns the billing pipeline?", 10),
)
OFF_CORPUS: tuple[str, ...] = (
    "what's the weather like in Lisbon tomorrow, and should I take an umbrella?",
    "can you tell me a good recipe for lemon risotto?",
    "who won the football match yesterday evening?",
)
