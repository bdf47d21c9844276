"""Routes of the integration API, mounted at /api/v1/ (no trailing slashes on resources)."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework import routers

from integration.errors import not_found_view
from integration.schema import API_DESCRIPTION
from integration.views.agenda import ProfessionalViewSet, ServiceViewSet, SlotViewSet
from integration.views.appointments import AppointmentViewSet
from integration.views.cases import CaseViewSet
from integration.views.contacts import ContactViewSet
from integration.views.opportunities import OpportunityViewSet
from integration.views.quotes import ProductViewSet, QuoteViewSet


class APIRootView(routers.APIRootView):
    """The browsable index of the integration API's resources."""

    schema = None  # an index for people, not part of the OpenAPI contract


class Router(routers.DefaultRouter):
    APIRootView = APIRootView
    include_format_suffixes = False


router = Router(trailing_slash=False)
router.register("contacts", ContactViewSet, basename="contact")
router.register("services", ServiceViewSet, basename="service")
router.register("professionals", ProfessionalViewSet, basename="professional")
router.register("slots", SlotViewSet, basename="slot")
router.register("appointments", AppointmentViewSet, basename="appointment")
router.register("products", ProductViewSet, basename="product")
router.register("quotes", QuoteViewSet, basename="quote")
router.register("opportunities", OpportunityViewSet, basename="opportunity")
router.register("cases", CaseViewSet, basename="case")

app_name = "integration"
urlpatterns = [
    path(
        "schema/",
        SpectacularAPIView.as_view(
            authentication_classes=[],
            custom_settings={
                "DESCRIPTION": API_DESCRIPTION,
                "POSTPROCESSING_HOOKS": [
                    "drf_spectacular.hooks.postprocess_schema_enums",
                    "integration.schema.strict_request_bodies",
                    "integration.schema.declare_rule_codes",
                ],
            },
        ),
        name="schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(authentication_classes=[], url_name="integration:schema"),
        name="docs",
    ),
    *router.urls,
    # Anything else under /api/v1/ is a JSON 404, never Django's HTML page.
    re_path(r"^.*$", not_found_view),
]
