"""The tool API's models in the staff roles (core.roles): everyone sees what the tool API did
and which references it showed."""

from core.roles import staff_grants

staff_grants(
    "tooling",
    agent_view=["toolcall", "exposedreference"],
)
