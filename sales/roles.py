"""Sales' models in the staff roles (core.roles): agents see the catalogue and the pipeline
but set no prices; salespeople also write quotes and run the pipeline; supervisors also run
the catalogue and the price lists. Salespeople, supervisors and administrators are the
company's sales staff (sales.selectors.sales_staff: new leads are emailed to them and
assigned among them). Supervisors see the sales settings; administrators change them."""

from core.roles import staff_grants

_SELLING = ["quote", "opportunity"]
_CATALOGUE = ["product", "pricelist", "pricelistitem"]

staff_grants(
    "sales",
    agent_view=[*_CATALOGUE, *_SELLING, "quoteline"],
    sales_add=_SELLING,
    sales_change=_SELLING,
    supervisor_add=_CATALOGUE,
    supervisor_change=_CATALOGUE,
    supervisor_view=["salessettings"],
    supervisor_delete=["pricelistitem"],
)
