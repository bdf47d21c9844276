import pytest


@pytest.fixture
def machine_environment(settings, sms_outbox, mailoutbox):
    """Codes by SMS and email into this process; a short lock timeout for the held-key rule."""
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 300
    return settings
