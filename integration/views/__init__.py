"""The integration API's views: thin DRF viewsets over the domain selectors and services.

`base` holds what every resource shares (the caller's company, references, validated filters,
lists and the one idempotent write path); each other module holds one resource's viewsets:
`contacts`, `agenda` (services, professionals, slots), `appointments`, `quotes` (products and
quotes), `opportunities`, `cases`. Nothing outside the integration app uses them (its
`urls.py` registers them), so this package re-exports no names.
"""
