"""The integration API in the staff roles (core.roles): its credentials are admins' alone."""

from core.roles import staff_grants

staff_grants("integration")
