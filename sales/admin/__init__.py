"""Staff admin for sales: catalog and stock, price lists, quotes and the opportunity pipeline.

Every transition button, stock count and quote goes through sales.services; no admin form
writes a state, a reservation or a total by itself. Django's autodiscovery imports this
package: importing the modules below registers their admins.
"""

from sales.admin.catalog import PriceListAdmin, ProductAdmin
from sales.admin.opportunities import OpportunityAdmin, SalesSettingsAdmin
from sales.admin.quotes import QuoteAdmin

__all__ = ["OpportunityAdmin", "PriceListAdmin", "ProductAdmin", "QuoteAdmin", "SalesSettingsAdmin"]
