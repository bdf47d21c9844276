"""The tool API's models in the staff roles (core.roles): everyone sees what the tool API did
and which references it showed (a conversation's trace links to them); they are records, on
the menu of supervisors and admins only."""

from core.roles import staff_grants

staff_grants(
    "tooling",
    agent_view=["toolcall", "exposedreference"],
    records=["toolcall", "exposedreference"],
)
