"""Request and response shapes of the integration API. Inputs are strict (unknown fields are
refused, nothing is defaulted, so an omitted field stays omitted in the idempotency
fingerprint); outputs carry public references and customer-facing names, never primary keys,
internal notes or tokens.

One module per resource (contacts, agenda, sales, support) and per shared concern:
`references` (public references in and out), `fields` (money, state labels, amounts,
instants), `strict` (the strict request base), `filters` (query parameters) and `errors` (the
documented error shape). Nothing outside the integration app uses these, so this package
re-exports no names: the app's own modules import each from the module that defines it.
"""
