"""Garante's kernel: tenancy, contacts, credentials, identity, verification and errors, which
every app builds on; it imports no app above it (docs/architecture.md)."""
