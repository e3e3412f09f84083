"""A test-only third-party plugin: one prompt section placed by before/after, one context section."""

from contextplane import ContextSection, Envelope, PromptSection, Row, Shed, hookimpl


@hookimpl
def register_prompt_sections(register):
    register(
        PromptSection(
            "house_rules", lambda ctx: "House rules: be brief.", after="identity", before="tool_guidance"
        )
    )


@hookimpl
def register_context_sections(register):
    register(
        ContextSection(
            "open_tickets",
            priority=35,
            shed=Shed.DROP_ROWS,
            draft=lambda req: [Row("T-1", 1, "T-1 printer on fire"), Row("T-2", 2, "T-2 coffee empty")],
            envelope=Envelope("open_tickets"),
        )
    )
