"""Bulk actions: choose by filter, confirm a frozen list, apply each of its emails.

The confirmation page freezes the ids it shows and signs them, with the user, the action and the time
it was issued (the session's CSRF key, `security.CsrfTokens.sign`): the apply step acts on exactly
that list, for at most BULK_CONFIRM_SECONDS, and refuses any list the page did not show.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from email_outbox.console.security import CsrfTokens
from email_outbox.console.views import (
    MAX_SEARCH_CHARS,
    actor,
    problem,
    reason_from,
    refuse_read_only,
    render,
    with_db,
)
from email_outbox.db.console_reads import ConsoleReads
from email_outbox.errors import InvalidInput, OutboxError, WrongState
from email_outbox.models import Status
from email_outbox.operator_text import REQUEUE_WARNING, parse_duration

log = logging.getLogger("email_outbox.console")

ACTIONS = {
    "requeue": "Requeue",
    "resolve-Sent": "Resolve as Sent",
    "resolve-Failed": "Resolve as Failed",
    "redrive": "Redrive",
}
# What a bulk action works on, and what a skipped email no longer was.
BULK_STATUS = {action: Status.UNKNOWN_OUTCOME for action in ACTIONS} | {"redrive": Status.FAILED}
# How long a confirmation page's frozen list may be applied.
BULK_CONFIRM_SECONDS = 900


def _sign(request: Request, action: str, ids: str, issued: str) -> str:
    csrf: CsrfTokens = request.app.state.settings.csrf
    return csrf.sign("bulk", request.state.user, action, ids, issued)


def _chosen_action(form: Any) -> str:
    action = str(form.get("action") or "")
    if action not in ACTIONS:
        raise InvalidInput("choose an action")
    return action


async def bulk_form(request: Request) -> Response:
    refused = refuse_read_only(request)
    if refused:
        return refused
    return render(request, "bulk.html", actions=ACTIONS, cap=request.app.state.settings.bulk_cap)


async def bulk_preview(request: Request) -> Response:
    refused = refuse_read_only(request)
    if refused:
        return refused
    form = await request.form()
    cap = request.app.state.settings.bulk_cap
    try:
        action = _chosen_action(form)
        older_text = str(form.get("older_than") or "0s")
        older = parse_duration(older_text)
        within_text = str(form.get("failed_within") or "1h")
        within = parse_duration(within_text)
        prefix = str(form.get("recipient_prefix") or "").strip()
        if len(prefix) > MAX_SEARCH_CHARS:
            raise InvalidInput(f"the recipient prefix is limited to {MAX_SEARCH_CHARS} characters")
        if action == "redrive":
            ids = await with_db(request, lambda r: r.failed_ids(within, prefix, cap))
        else:
            ids = await with_db(request, lambda r: r.unknown_outcome_ids(older, prefix, cap))
    except OutboxError as exc:
        return problem(request, exc)
    capped = len(ids) > cap
    ids = ids[:cap]
    frozen = ",".join(map(str, ids))
    return render(
        request,
        "bulk_confirm.html",
        action=action,
        action_label=ACTIONS[action],
        ids=ids,
        frozen=frozen,
        issued=(issued := str(int(time.time()))),
        signature=_sign(request, action, frozen, issued),
        capped=capped,
        cap=cap,
        older_than=older_text,
        failed_within=within_text,
        prefix=prefix,
        requeue_warning=REQUEUE_WARNING,
        status=BULK_STATUS[action].value,
    )


async def bulk_apply(request: Request) -> Response:
    refused = refuse_read_only(request)
    if refused:
        return refused
    form = await request.form()
    cap = request.app.state.settings.bulk_cap
    try:
        action = _chosen_action(form)
        frozen = str(form.get("ids") or "")
        issued = str(form.get("issued") or "")
        if not hmac.compare_digest(_sign(request, action, frozen, issued), str(form.get("signature") or "")):
            raise InvalidInput("the list of emails is not the one the confirmation page showed")
        if not issued.isdigit() or time.time() - int(issued) > BULK_CONFIRM_SECONDS:
            raise InvalidInput("the confirmation page is more than 15 minutes old: preview the list again")
        if form.get("confirm") != "yes":
            raise InvalidInput("tick the confirmation box to apply the action to the listed emails")
        ids = [int(x) for x in frozen.split(",") if x]
        if not ids or len(ids) > cap:
            raise InvalidInput(f"a bulk action takes 1 to {cap} emails")
        reason = reason_from(form)
        who = actor(request)

        def apply(r: ConsoleReads) -> list[tuple[int, bool]]:
            results = []
            for attempt_id in ids:
                if action == "requeue":
                    affected = r.requeue(attempt_id, who, reason)
                elif action == "redrive":
                    try:
                        affected = r.redrive(attempt_id, who, reason)
                    except WrongState:  # its content is gone (erased, purged): skipped, as the batch does
                        affected = 0
                else:
                    affected = r.resolve(attempt_id, action.split("-", 1)[1], who, reason, None)
                results.append((attempt_id, bool(affected)))
            return results

        results = await with_db(request, apply)
    except ValueError:
        return problem(request, InvalidInput("the list of emails is not valid"))
    except OutboxError as exc:
        return problem(request, exc)
    done = [i for i, ok in results if ok]
    skipped = [i for i, ok in results if not ok]
    log.info("bulk %s by %s: %d done, %d skipped", action, who, len(done), len(skipped))
    return render(
        request,
        "bulk_done.html",
        action_label=ACTIONS[action],
        done=done,
        skipped=skipped,
        total=len(ids),
        skipped_why="not Failed, SES accepted it or may have, or its content is gone"
        if action == "redrive"
        else "no longer UnknownOutcome",
    )
