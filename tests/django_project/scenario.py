"""Runs in a process of its own (Django is configured once per process): what a Django application
does with the outbox's backend, printed as JSON for the test to check. Usage: python -m
tests.django_project.scenario (the database in EO_DJANGO_* variables, the driver in EO_DJANGO_DRIVER)."""

from __future__ import annotations

import base64
import json
import os
import sys
from email.mime.image import MIMEImage
from email.mime.text import MIMEText
from pathlib import Path
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.settings")
django.setup()

from django.core.mail import (  # noqa: E402
    EmailMessage,
    EmailMultiAlternatives,
    get_connection,
    send_mail,
    send_mass_mail,
)
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from email_outbox.errors import InvalidAddress  # noqa: E402
from tests.django_project.shop.models import Order  # noqa: E402

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Rollback(Exception):
    pass


def main() -> dict[str, Any]:
    call_command("migrate", run_syncdb=True, verbosity=0)
    out: dict[str, Any] = {}
    attachment_file = Path(sys.argv[1])

    with transaction.atomic():
        order = Order.objects.create(email="ann@example.com")
        message = EmailMultiAlternatives(
            subject="Order 1 🧾",
            body="Thanks — plain text.",
            to=["Ann Lee <ann@example.com>"],
            cc=["carl@example.com"],
            bcc=["audit@example.com"],
            reply_to=["Support <help@example.com>"],
            headers={"X-Order": str(order.pk), "X-Outbox-Notification-Id": "order-1"},
        )
        message.attach_alternative('<p>Thanks</p><img src="cid:logo@example.com">', "text/html")
        message.attach("notes.txt", "a text attachment ✓", "text/plain")
        message.attach("data.bin", bytes(range(256)), "application/octet-stream")
        message.attach_file(str(attachment_file))
        logo = MIMEImage(PIXEL, "png")
        logo.add_header("Content-ID", "<logo@example.com>")
        logo.add_header("Content-Disposition", "inline", filename="logo.png")
        message.attach(logo)
        message.attach(MIMEText("a MIME part", "plain", "utf-8"))
        out["full"] = message.send()
        out["again"] = message.send()  # the same notification id: accepted, not a second email

    try:
        with transaction.atomic():
            Order.objects.create(email="rolled@example.com")
            out["rolled_back_send"] = send_mail("Never", "never sent", None, ["rolled@example.com"])
            raise Rollback
    except Rollback:
        pass

    out["plain"] = send_mail("Plain", "a plain send_mail", None, ["plain@example.com"])
    out["mass"] = send_mass_mail(
        [
            ("Mass 1", "one", None, ["m1@example.com"]),
            ("Mass 2", "two", "Other <shop@example.com>", ["m2@example.com"]),
        ]
    )

    with transaction.atomic():
        Order.objects.create(email="kept@example.com")
        try:
            EmailMessage("Bad", "bad", None, ["not an address"]).send()
        except InvalidAddress as exc:
            out["refusal"] = [type(exc).__name__, exc.errno, str(exc)]
        # The refusal left the transaction usable: this order and email commit.
        out["after_refusal"] = EmailMessage("Good", "good", None, ["good@example.com"]).send()
    out["silent"] = get_connection(fail_silently=True).send_messages(
        [EmailMessage("Bad", "bad", None, ["not an address"])]
    )
    out["orders"] = sorted(Order.objects.values_list("email", flat=True))
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
