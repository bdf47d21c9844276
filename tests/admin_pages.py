"""The admin as staff's browser meets it: a change page's address, its transition buttons, and
what the browser posts back from a change page."""

import re

from django.db.models import Model


def change_url(obj: Model) -> str:
    return f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/{obj.pk}/change/"


def transition_buttons(response) -> set[str]:
    return set(re.findall(r'name="_fsm_transition_to"\s+value="(\w+)"', response.content.decode()))


def change_form_data(client, obj: Model, **overrides) -> dict:
    """What the browser would post back from the change page of `obj`, plus the overrides."""
    response = client.get(change_url(obj))
    assert response.status_code == 200
    form = response.context["adminform"].form
    data = {
        name: ("" if value is None else getattr(value, "pk", value))
        for name, value in form.initial.items()
        if name in form.fields
    }
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS", "MAX_NUM_FORMS"):
            data[f"{management.prefix}-{name}"] = management[name].value()
        for existing in inline.formset.initial_forms:
            for name in existing.fields:
                value = existing[name].value()
                if value is not None:
                    data[existing.add_prefix(name)] = getattr(value, "pk", value)
    data.update(overrides)
    return data


def form_data(page) -> dict:
    """What a browser posts back from an admin change page untouched: every field of the main
    form and of each inline form as rendered, with the inlines' management forms."""
    forms = [page.context["adminform"].form]
    for inline in page.context["inline_admin_formsets"]:
        forms.append(inline.formset.management_form)
        forms.extend(inline.formset.forms)
    data: dict = {}
    for form in forms:
        for name, field in form.fields.items():
            value = form[name].value()
            widget = field.widget
            key = form.add_prefix(name)
            if getattr(widget, "widgets", None):  # a split date and time
                for index, part in enumerate(widget.decompress(value)):
                    data[f"{key}_{index}"] = "" if part is None else part
            elif isinstance(value, bool):
                if value:
                    data[key] = "on"
            elif value is not None:
                data[key] = value
    return data


def confirmation_data(page, reason: str, details: str = "") -> dict:
    """What a browser posts from a confirmation page (core.admin.confirmation): what the page
    carries (the records, what each was confirmed against, the action), the reason chosen
    and the words typed."""
    data: dict = {}
    for name, value in page.context["hidden"]:
        data.setdefault(name, []).append(value)
    data["reason"] = reason
    data["details"] = details
    data["_confirm"] = "yes"
    return data


def confirm(client, obj: Model, transition: str, reason: str, details: str = ""):
    """Press a confirmed transition's button on the change page of `obj`, then answer the
    confirmation page it opens; the page the browser ends on."""
    pressed = client.post(
        change_url(obj), change_form_data(client, obj, _fsm_transition_to=transition)
    )
    assert pressed.status_code == 302, pressed.content.decode()[:500]
    page = client.get(pressed["Location"])
    assert page.status_code == 200, [str(m) for m in page.context["messages"]]
    return client.post(pressed["Location"], confirmation_data(page, reason, details), follow=True)


def quote_form_data(company, contact, rows, opportunity="") -> dict:
    """What the quote add page posts: its company, contact and opportunity, and a row per
    (SKU, quantity as typed) in its products' inline (sales.admin.quote_entry)."""
    from sales.models import Product

    data = {
        "company": company.pk,
        "contact": contact.pk,
        "opportunity": getattr(opportunity, "pk", opportunity),
        "lines-TOTAL_FORMS": len(rows),
        "lines-INITIAL_FORMS": 0,
        "lines-MIN_NUM_FORMS": 1,
        "lines-MAX_NUM_FORMS": 50,
    }
    for index, (sku, quantity) in enumerate(rows):
        product = Product.objects.filter(company=company, sku=sku).first()
        data[f"lines-{index}-product"] = "" if product is None else product.pk
        data[f"lines-{index}-quantity"] = quantity
    return data


def quote_form_errors(response) -> list[str]:
    """Every error the quote add page shows: the form's, the rows' and the rows' together."""
    errors = [
        str(e) for messages in response.context["adminform"].form.errors.values() for e in messages
    ]
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        errors += [str(e) for e in formset.non_form_errors()]
        for form_errors in formset.errors:
            errors += [str(e) for messages in form_errors.values() for e in messages]
    return errors
