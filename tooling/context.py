"""What a tool handler knows about the call it serves."""

from dataclasses import dataclass, field
from functools import cached_property

from core.models import Company, Conversation


@dataclass
class CallMeta:
    """The Gateway's `_meta` keys (or their HTTP header equivalents on REST surfaces)."""

    conversation_id: str | None = None
    idempotency_key: str | None = None
    fault: str | None = None


@dataclass
class ToolContext:
    company: Company
    meta: CallMeta
    surface: str = "mcp"
    extra: dict = field(default_factory=dict)

    @cached_property
    def conversation(self) -> Conversation:
        """The conversation of this call, created on first sight."""
        conversation, _ = Conversation.objects.get_or_create(
            company=self.company, external_id=self.meta.conversation_id
        )
        return conversation
