"""One lifecycle for every kind of bearer credential (core.models.BearerCredential: the
Gateway's, the integration API's): issued with its clear token shown once, found by its
token's hash, its use noted at most once a minute, rotated, revoked for good.

Writes are in core.credentials.services, reads in core.credentials.selectors; the staff admin's
base is core.admin.CredentialAdmin. What a kind adds on top stays with it: the Gateway's
authentication cache (core.selectors, forgotten by core.signals), the integration API's scopes.
"""
