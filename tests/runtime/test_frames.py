"""Frame detection and turn position: by marker, never by content."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from contextplane_langgraph import is_context_frame, is_operator_input, strip_context_frames, turn_position


def test_frames_are_detected_by_marker_only() -> None:
    pasted = HumanMessage("<working_state>\n- pasted by the operator\n</working_state>")
    v1 = HumanMessage("<injected_memory>x</injected_memory>", additional_kwargs={"context_frame": True})
    v1b = HumanMessage("anything", additional_kwargs={"is_context_frame": True})
    ours = HumanMessage("projection", additional_kwargs={"contextplane_projection": True})
    off = HumanMessage("not a frame", additional_kwargs={"context_frame": False})
    assert [is_context_frame(m) for m in (pasted, v1, v1b, ours, off)] == [False, True, True, True, False]
    kept, stripped = strip_context_frames([pasted, v1, AIMessage("a"), v1b, ours, off])
    assert kept == [pasted, AIMessage("a"), off]
    assert stripped == [v1, v1b, ours]


def test_operator_input_excludes_guard_notes_summaries_and_frames() -> None:
    assert is_operator_input(HumanMessage("hi"))
    assert is_operator_input(HumanMessage("steer", additional_kwargs={"steer": True}))
    assert not is_operator_input(HumanMessage("g", additional_kwargs={"guard_note": True}))
    assert not is_operator_input(HumanMessage("s", additional_kwargs={"lc_source": "summarization"}))
    assert not is_operator_input(HumanMessage("f", additional_kwargs={"context_frame": True}))
    assert not is_operator_input(AIMessage("a"))


def test_turn_position_counts_turns_calls_and_takes_the_newest_operator_input() -> None:
    msgs = [
        HumanMessage("first"),
        AIMessage("a0"),
        HumanMessage("second"),
        HumanMessage("<frame>", additional_kwargs={"context_frame": True}),
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
        ToolMessage("r", tool_call_id="c1"),
        HumanMessage("steer it", additional_kwargs={"folded_steer": True}),
        HumanMessage("guard", additional_kwargs={"is_guard_note": True}),
    ]
    # Turn 1 (second operator input), one model call so far, the steer is the query.
    assert turn_position(msgs) == (1, 1, "steer it")
    assert turn_position([]) == (0, 0, "")


def test_the_codec_counts_a_tool_call_as_the_provider_is_sent_it() -> None:
    """An assistant turn that only calls a tool has no text; the cacheable prefix counted it as
    0 chars (issue 24). The codec's text is the text plus each call as ``name(arguments)``, the
    arguments as the provider integrations serialise them, the same on every replay."""
    import json

    from langchain_core.messages import AIMessage, ToolMessage

    from contextplane_langgraph.frames import sent_text
    from contextplane_langgraph.middleware import ProjectionCarrier

    call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"topic": "t2"}, "id": "c1"}])
    assert ProjectionCarrier.text_of(call) == 'lookup({"topic": "t2"})'
    assert sent_text(call) == "lookup(" + json.dumps({"topic": "t2"}) + ")"
    replayed = AIMessage(
        content="", tool_calls=[{"name": "lookup", "args": {"topic": "t2"}, "id": "c1"}], id="x"
    )
    assert sent_text(replayed) == sent_text(call)
    both = AIMessage(
        content="Let me look.",
        tool_calls=[{"name": "a", "args": {}, "id": "1"}, {"name": "b", "args": {"k": "é"}, "id": "2"}],
    )
    assert sent_text(both) == 'Let me look.a({})b({"k": "é"})'
    assert ProjectionCarrier.text_of(ToolMessage("notes on t2", tool_call_id="c1")) == "notes on t2"
    assert sent_text(AIMessage("plain answer")) == "plain answer"
