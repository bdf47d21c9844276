import pytest


@pytest.fixture
def machine_environment(settings, sms_outbox, mailoutbox):
    """Nothing leaves this process (the world's sandboxes keep their codes in their outbox,
    and the staff's email goes to a list); a short lock timeout for the held-key rule."""
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 300
    return settings
