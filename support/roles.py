"""Support's models in the staff roles (core.roles): agents open and move cases and comment
on them; supervisors also set the company's support settings."""

from core.roles import staff_grants

staff_grants(
    "support",
    agent_view=["case", "casecomment"],
    agent_add=["case", "casecomment"],
    agent_change=["case"],
    supervisor_view=["supportsettings"],
    supervisor_change=["supportsettings"],
)
