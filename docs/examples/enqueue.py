"""Mark an order paid and enqueue its receipt, PDF attached, in one transaction (docs/procedures.md).

    python enqueue.py ORDER_ID PDF_FILE helper|dbapi

The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
OUTBOX_DB_NAME. Prints `affected attempt_id`; a sender not on the allow-list exits 3.
tests/contract/test_other_languages.py runs this file and checks that docs/procedures.md shows the parts
between the docs:start and docs:end lines unchanged.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Any

import mysql.connector
from email_outbox import Attachment, Message, enqueue_message
from email_outbox.errors import SenderNotAllowed


# docs:start helper
def enqueue_receipt(connection: Any, order_id: int, pdf: bytes) -> tuple[int, int]:
    """Marks the order paid and enqueues its receipt in one transaction: both commit or neither does."""
    connection.start_transaction()
    try:
        cursor = connection.cursor()
        cursor.execute("UPDATE orders SET state = 'paid' WHERE id = %s", (order_id,))
        cursor.close()
        result = enqueue_message(
            connection,
            f"order-{order_id}:receipt",
            Message(
                sender="Shop <shop@example.com>",
                to=["Ann Lee <ann@example.com>"],
                cc=["accounts@example.com"],
                reply_to=["Support <help@example.com>"],
                subject=f"Your receipt for order {order_id} 🧾",
                text="Thank you for your order. The receipt is attached.",
                html="<p>Thank you for your order. The receipt is attached.</p>",
                headers={
                    "List-Unsubscribe": "<https://example.com/unsubscribe/ann>",
                    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                },
                tags={"kind": "receipt"},
                attachments=[Attachment(f"receipt-{order_id}.pdf", "application/pdf", pdf)],
            ),
        )
        connection.commit()
    except mysql.connector.Error as exc:
        connection.rollback()
        # A refusal: sqlstate '45000', errno its rule class (email_outbox.errors has one class per number),
        # msg naming the member and the rule.
        if exc.errno == SenderNotAllowed.errno:
            raise SenderNotAllowed(f"sender not allowed: {exc.msg}") from exc
        raise
    except BaseException:
        connection.rollback()
        raise
    return result.affected, result.attempt_id  # affected 0: already enqueued, attempt_id is that row


# docs:end


# docs:start dbapi
SENDER_NOT_ALLOWED = (
    45005  # the refusal number for a sender not on the allow-list (docs/procedures.md, Errors)
)


class SenderRefused(Exception):
    """The from address is not on this account's allow-list."""


def enqueue_receipt_dbapi(connection: Any, order_id: int, pdf: bytes) -> tuple[int, int]:
    """The same with plain DB-API: the json and base64 modules build the document."""
    message = json.dumps(
        {
            "from": "Shop <shop@example.com>",
            "to": ["Ann Lee <ann@example.com>"],
            "cc": ["accounts@example.com"],
            "reply_to": ["Support <help@example.com>"],
            "subject": f"Your receipt for order {order_id} 🧾",
            "text": "Thank you for your order. The receipt is attached.",
            "html": "<p>Thank you for your order. The receipt is attached.</p>",
            "headers": {
                "List-Unsubscribe": "<https://example.com/unsubscribe/ann>",
                "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            },
            "tags": {"kind": "receipt"},
            "attachments": [
                {
                    "filename": f"receipt-{order_id}.pdf",
                    "content_type": "application/pdf",
                    "content_base64": base64.b64encode(pdf).decode("ascii"),
                }
            ],
        },
        ensure_ascii=False,
    )
    connection.start_transaction()
    try:
        cursor = connection.cursor()
        cursor.execute("UPDATE orders SET state = 'paid' WHERE id = %s", (order_id,))
        cursor.execute("CALL email_enqueue_message(%s, %s)", (f"order-{order_id}:receipt", message))
        affected, attempt_id = cursor.fetchall()[0]
        while cursor.nextset():  # the CALL's status result: drain it before the next statement
            if cursor.description:
                cursor.fetchall()
        cursor.close()
        connection.commit()
    except mysql.connector.Error as exc:
        connection.rollback()
        if exc.errno == SENDER_NOT_ALLOWED:  # a refusal: sqlstate '45000', errno its rule class
            raise SenderRefused(f"sender not allowed: {exc.msg}") from exc
        raise
    except BaseException:
        connection.rollback()
        raise
    return int(affected), int(attempt_id)


# docs:end


def main() -> None:
    order_id, pdf_file, way = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    connection = mysql.connector.connect(
        host=os.environ.get("OUTBOX_DB_HOST", "127.0.0.1"),
        port=int(os.environ.get("OUTBOX_DB_PORT", "3306")),
        user=os.environ["OUTBOX_DB_USER"],
        password=os.environ.get("OUTBOX_DB_PASSWORD", ""),
        database=os.environ["OUTBOX_DB_NAME"],
        charset="utf8mb4",
    )
    try:
        enqueue = enqueue_receipt if way == "helper" else enqueue_receipt_dbapi
        affected, attempt_id = enqueue(connection, order_id, pdf_file.read_bytes())
    except (SenderNotAllowed, SenderRefused) as refused:
        print(refused, file=sys.stderr)
        sys.exit(3)
    finally:
        connection.close()
    print(affected, attempt_id)


if __name__ == "__main__":
    main()
