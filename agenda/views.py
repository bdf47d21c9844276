"""The page a customer reaches from the link in an appointment message (agenda.opt_out)."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from agenda.opt_out import contact_messages_opt_out, opt_out_target


# The link's key is the credential, and a mail client's one-click unsubscribe (RFC 8058) posts
# without a token of ours; the only thing a POST can do is stop messages to its own contact.
@csrf_exempt
@require_http_methods(["GET", "POST"])
def appointment_messages_opt_out(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks (a mail scanner following the link changes nothing); POST opts out. A link
    past its lifetime answers 410 with a page saying so, and changes nothing."""
    target = opt_out_target(token)
    if target is None:
        return render(request, "agenda/opt_out.html", {"invalid": True}, status=404)
    with translation.override(target.contact.company.language):
        if target.expired:
            context = {
                "expired": True,
                "company": target.contact.company.name,
                "language": target.contact.company.language,
            }
            return render(request, "agenda/opt_out.html", context, status=410)
        done = request.method == "POST"
        if done:
            contact_messages_opt_out(contact=target.contact, channel=target.channel)
        context = {
            "company": target.contact.company.name,
            "by_sms": target.channel == "sms",
            "done": done,
            "language": target.contact.company.language,
        }
        return render(request, "agenda/opt_out.html", context)
