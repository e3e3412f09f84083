"""``contextplane explain`` and ``contextplane replay`` against a PostgreSQL backend: turns
composed and recorded there (turn inputs, history position) are explained from the store as it
was, and replayed byte-identical, after the memories changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from contextplane import PluginHost, compose_projected_context, open_backend
from contextplane.cli import main
from contextplane.config import load_config


def test_explain_and_replay_a_turn_recorded_on_postgresql(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
        '[context]\ncontext_window = 200000\nproject = "web"\n'
    )
    config = load_config(str(cfg))
    host = PluginHost.from_entry_points(config, strict=True)
    backend: Any = open_backend(host)
    try:
        assert type(backend).__name__ == "PostgresBackend"
        m = backend.memories
        window = m.add_chunk(
            "the deploy window is Tuesday afternoon", "fact", "operator", namespace="project:web"
        )
        canary = m.add_chunk(
            "deploy canary first, then the fleet", "fact", "operator", namespace="project:web"
        )
        other = m.add_chunk("lunch is at noon on Fridays", "fact", "operator")
        first = compose_projected_context(
            "when is the deploy window for the canary?",
            backend,
            None,
            {"goal": "Ship it"},
            session_id="s1",
            turn_index=1,
            host=host,
        )
        assert window in {i for ids in first.delivered_ids.values() for i in ids}, first.delivered_ids
        # After the turn: the memory it used is rejected, another superseded, a new one written.
        m.set_review_state(window, "rejected", by="curator")
        m.supersede(canary, "deploy the canary to one region first, then the fleet")
        m.add_chunk("the deploy window moved to Thursday", "fact", "operator", namespace="project:web")
    finally:
        backend.close()

    def run(*args: str) -> Any:
        return CliRunner().invoke(main, [*args, "--config", str(cfg), "--json"])

    logged = run("injections")  # the other inspecting commands follow store.backend too
    assert logged.exit_code == 0, logged.output
    assert [(r["session_id"], r["turn_index"]) for r in json.loads(logged.stdout)] == [("s1", 1)]
    assert window in json.loads(logged.stdout)[0]["delivered"]["retrieved"]
    explained = run("explain", window, "--session", "s1", "--turn", "1")
    assert explained.exit_code == 0, explained.output
    verdict = json.loads(explained.stdout)
    assert verdict["memory_id"] == window and verdict["turn"]["basis"] == "recorded"
    assert verdict["verdict"] == "delivered", verdict
    assert verdict["turn"]["history_position"]["seq"] == 3  # the three 'created' events before the turn
    now = run("explain", window, "--query", "when is the deploy window for the canary?")
    assert now.exit_code == 0, now.output
    assert (json.loads(now.stdout)["verdict"], json.loads(now.stdout)["reason"]) == ("filtered", "rejected")

    replayed = run("replay", "--session", "s1", "--turn", "1")
    assert replayed.exit_code == 0, replayed.output
    report = json.loads(replayed.stdout)
    assert report["identical"] and report["mode"] == "as_of"
    assert report["recorded_sha256"] == report["replayed_sha256"]
    assert {s["status"] for s in report["sections"]} == {"same"}
    today = CliRunner().invoke(
        main, ["replay", "--session", "s1", "--turn", "1", "--now", "--config", str(cfg)]
    )
    assert today.exit_code == 1 and "DIFFERS from what was delivered" in today.stdout
    assert (
        f"memory {window}'s lifecycle changed after the turn: review state set to rejected (by curator)"
        in (today.stdout)
    )
    retrieved = next(s for s in report["sections"] if s["label"] == "retrieved")
    # "lunch is at noon" shares only function words with the question: not scored, not injected
    assert retrieved["recorded"]["ids"] == retrieved["replayed"]["ids"] == [window, canary]
    assert other not in json.loads(logged.stdout)[0]["delivered"]["retrieved"]


def test_a_summary_stored_in_the_turn_s_second_after_it_is_not_replayed_on_postgresql(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    import time

    from contextplane.explain import replay

    cfg = tmp_path / "contextplane.toml"
    cfg.write_text(
        f'[store]\nbackend = "postgres"\nurl = "{pg_url}"\n[plugin.postgres]\nschema = "{pg_schema}"\n'
        '[context]\ncontext_window = 200000\nproject = "web"\n'
    )
    host = PluginHost.from_entry_points(load_config(str(cfg)), strict=True)
    backend: Any = open_backend(host)
    try:
        backend.summaries.add("s0", "Earlier we agreed the deploy window is Friday.", topic="deploy")
        for index in (1, 2):
            time.sleep(1.02 - time.time() % 1)  # the turn and the next summary share one second
            compose_projected_context(
                "when is the deploy window?", backend, None, {"goal": "Ship it"},
                session_id="s1", turn_index=index, host=host,
            )
            backend.summaries.add(f"later-{index}", f"Written after turn {index}.", topic="deploy")
            report = replay(backend, "s1", index, host=host)
            assert report.identical, [(d.label, d.reasons) for d in report.changed]
    finally:
        backend.close()
