"""Agenda's models in the staff roles (core.roles): agents book, cancel and mark
appointments; supervisors also run the services, professionals and their schedules."""

from core.roles import staff_grants

_SCHEDULES = ["service", "professional", "workinghours", "timeoff"]

staff_grants(
    "agenda",
    agent_view=[*_SCHEDULES, "appointment"],
    agent_add=["appointment"],
    agent_change=["appointment"],
    supervisor_view=["agendasettings"],
    supervisor_add=_SCHEDULES,
    supervisor_change=[*_SCHEDULES, "agendasettings"],
    supervisor_delete=["workinghours", "timeoff"],
)
