// Mark an order paid and enqueue its receipt, PDF attached, in one transaction (docs/procedures.md).
//
//   npm install mysql2 && node enqueue.js ORDER_ID PDF_FILE
//
// The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
// OUTBOX_DB_NAME. Prints `affected attempt_id`; a sender not on the allow-list exits 3, a tenant this
// account may not use exits 4.
// tests/contract/test_other_languages.py runs this file and checks that docs/procedures.md shows the
// part between the docs:start and docs:end lines unchanged.
'use strict';
const fs = require('node:fs');
const mysql = require('mysql2/promise');

// docs:start
/** The refusal number for a from address not on this account's allow-list (docs/procedures.md, Errors). */
const SENDER_NOT_ALLOWED = 45005;
/** The refusal number for a tenant this account may not use, or a priority above its highest. */
const TENANT_NOT_ALLOWED = 45012;
class SenderNotAllowed extends Error {}
class TenantNotAllowed extends Error {}

/** Marks the order paid and enqueues its receipt in one transaction: both commit or neither does. */
async function enqueueReceipt(conn, orderId, pdf) {
  const message = JSON.stringify({
    from: 'Shop <shop@example.com>',
    to: ['Ann Lee <ann@example.com>'],
    cc: ['accounts@example.com'],
    reply_to: ['Support <help@example.com>'],
    subject: `Your receipt for order ${orderId} 🧾`,
    text: 'Thank you for your order. The receipt is attached.',
    html: '<p>Thank you for your order. The receipt is attached.</p>',
    headers: {
      'List-Unsubscribe': '<https://example.com/unsubscribe/ann>',
      'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    },
    tags: { kind: 'receipt' },
    tenant: 'shop', // this service's share of the outbox (docs/procedures.md, Tenants)
    attachments: [{
      filename: `receipt-${orderId}.pdf`,
      content_type: 'application/pdf',
      content_base64: pdf.toString('base64'), // pdf is a Buffer
    }],
  });
  await conn.beginTransaction();
  try {
    await conn.execute("UPDATE orders SET state = 'paid' WHERE id = ?", [orderId]);
    // A CALL answers with its result set and then a status: results[0] is the result set.
    const [results] = await conn.query('CALL email_enqueue_message(?, ?)', [`order-${orderId}:receipt`, message]);
    const { affected, attempt_id: attemptId } = results[0][0]; // affected 0: already enqueued, attemptId is that row
    await conn.commit();
    return { affected, attemptId };
  } catch (err) {
    await conn.rollback();
    // A refusal: err.sqlState '45000', err.errno its rule class, err.sqlMessage names the member and the rule.
    if (err.errno === SENDER_NOT_ALLOWED) {
      throw new SenderNotAllowed(`sender not allowed: ${err.sqlMessage}`, { cause: err });
    }
    if (err.errno === TENANT_NOT_ALLOWED) {
      throw new TenantNotAllowed(`tenant not allowed: ${err.sqlMessage}`, { cause: err });
    }
    throw err;
  }
}
// docs:end

async function main() {
  const conn = await mysql.createConnection({
    host: process.env.OUTBOX_DB_HOST || '127.0.0.1',
    port: Number(process.env.OUTBOX_DB_PORT || 3306),
    user: process.env.OUTBOX_DB_USER,
    password: process.env.OUTBOX_DB_PASSWORD || '',
    database: process.env.OUTBOX_DB_NAME,
  });
  try {
    const { affected, attemptId } = await enqueueReceipt(conn, Number(process.argv[2]), fs.readFileSync(process.argv[3]));
    console.log(`${affected} ${attemptId}`);
  } finally {
    await conn.end();
  }
}

main().catch((err) => {
  const refused = err instanceof SenderNotAllowed || err instanceof TenantNotAllowed;
  console.error(refused ? err.message : err);
  process.exit(err instanceof SenderNotAllowed ? 3 : err instanceof TenantNotAllowed ? 4 : 1);
});
