"""Sales' models in the staff roles (core.roles): agents see the catalogue and the pipeline
but set no prices; supervisors run both."""

from core.roles import staff_grants

_MANAGED = ["product", "pricelist", "pricelistitem", "quote", "opportunity"]

staff_grants(
    "sales",
    agent_view=[*_MANAGED, "quoteline"],
    supervisor_add=_MANAGED,
    supervisor_change=_MANAGED,
    supervisor_delete=["pricelistitem"],
)
