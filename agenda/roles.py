"""Agenda's models in the staff roles (core.roles): agents book, cancel and mark
appointments, and note a professional's time off; supervisors also run the services,
professionals and their schedules, and the calendar feeds (whose events name customers)."""

from core.roles import staff_grants

_SCHEDULES = ["service", "professional", "workinghours", "timeoff"]

staff_grants(
    "agenda",
    agent_view=[*_SCHEDULES, "appointment"],
    agent_add=["appointment", "timeoff"],
    agent_change=["appointment", "timeoff"],
    supervisor_view=["agendasettings", "calendarfeed"],
    supervisor_add=[*_SCHEDULES, "calendarfeed"],
    supervisor_change=[*_SCHEDULES, "agendasettings", "calendarfeed"],
    supervisor_delete=["workinghours", "timeoff"],
)
