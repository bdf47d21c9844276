"""The two baseline endpoints, written the way the django-ninja and Django docs show."""

from datetime import datetime

from django.db import transaction
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Schema

from bench.baselines.models import Item, Note

api = NinjaAPI(urls_namespace="baselines")


class ItemOut(Schema):
    key: str
    name: str
    price_cents: int
    created_at: datetime


class NoteIn(Schema):
    key: str
    subject: str
    description: str


class NoteOut(Schema):
    id: int
    key: str
    subject: str
    created_at: datetime


@api.get("/read/{key}", response=ItemOut)
def plain_read(request, key: str) -> Item:
    """Plain read: one ORM `.get()` by a unique key, returned through a schema."""
    return get_object_or_404(Item, key=key)


@api.post("/write", response=NoteOut)
def plain_write(request, payload: NoteIn) -> Note:
    """Plain write: `transaction.atomic()` and one ORM `.create()` with a fresh unique key."""
    with transaction.atomic():
        return Note.objects.create(**payload.dict())


@api.get("/ping")
def ping(request) -> dict[str, bool]:
    return {"ok": True}
