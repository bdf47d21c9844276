"""Agenda tools for the Gateway: thin wrappers over agenda selectors and services."""

from pydantic import Field

from agenda.selectors import service_list
from tooling.context import ToolContext
from tooling.output import listing, page
from tooling.registry import ToolInput, tool


class ListServicesIn(ToolInput):
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of services.")


@tool(
    name="list_services",
    title="List bookable services",
    description=(
        "Lists the services customers can book, with their duration in minutes. "
        "Use the service name with find_available_slots."
    ),
    input=ListServicesIn,
)
def list_services(ctx: ToolContext, params: ListServicesIn) -> dict:
    services, has_more = page(service_list(company=ctx.company)[: params.limit + 1], params.limit)
    items = [
        {"name": s.name, "description": s.description, "duration_minutes": s.duration_minutes}
        for s in services
    ]
    return listing(items, has_more=has_more)
