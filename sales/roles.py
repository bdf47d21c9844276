"""Sales' models in the staff roles (core.roles): agents see the catalogue and the pipeline
but set no prices; supervisors run both, and are with the administrators the company's sales
staff (sales.selectors.sales_staff: new leads are emailed to them and assigned among them).
Supervisors see the sales settings; administrators change them."""

from core.roles import staff_grants

_MANAGED = ["product", "pricelist", "pricelistitem", "quote", "opportunity"]

staff_grants(
    "sales",
    agent_view=[*_MANAGED, "quoteline"],
    supervisor_add=_MANAGED,
    supervisor_change=_MANAGED,
    supervisor_view=["salessettings"],
    supervisor_delete=["pricelistitem"],
)
