// A minimal outbox worker in Node, written from docs/procedures.md alone: it claims a batch, sends
// each whole message (recipients, cc, bcc, reply-to, headers, tags, attachments) with SESv2
// SendEmail, and finalizes each row by its claim token.
//
//   npm install mysql2 && node worker.js
//
// The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
// OUTBOX_DB_NAME; SES from OUTBOX_SES_ENDPOINT (default https://email.us-east-1.amazonaws.com),
// AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the default sender from OUTBOX_DEFAULT_FROM.
// Prints one line per claimed row: `id status message_id`. tests/contract/test_other_languages.py runs
// it against the local SES endpoint and checks what that endpoint received, and that
// docs/procedures.md shows the part between the docs:start and docs:end lines unchanged.
'use strict';
const crypto = require('node:crypto');
const mysql = require('mysql2/promise');

// docs:start
/** Claims up to `limit` rows, sends each, finalizes each; returns [id, status, messageId] per row. */
async function runOnce(conn, ses, limit) {
  const token = crypto.randomUUID().replace(/-/g, ''); // new for every claim
  // Autocommit on: the claim commits its own transaction and returns the rows it now holds.
  const [results] = await conn.query('CALL email_claim_batch(?, ?, ?, ?)', [token, 'node-worker', 120, limit]);
  const done = [];
  for (const row of results[0]) {
    const options = typeof row.message_options === 'string' ? JSON.parse(row.message_options)
      : row.message_options; // NULL for a row from email_enqueue: to_address is its one recipient
    let attachments = [];
    if (row.attachment_bytes > 0) { // loaded just before the send, never with the claim
      const [loaded] = await conn.query('CALL email_claimed_attachments(?, ?)', [row.id, token]);
      attachments = loaded[0];
    }
    const answer = await sendEmail(ses, buildRequest(row, options, attachments, ses.defaultFrom));
    let result;
    let status;
    if (answer.status === 200) {
      [result] = await conn.query('CALL email_finalize_sent(?, ?, ?)', [row.id, token, answer.body.MessageId]);
      status = 'Sent';
    } else if (answer.status === 0) { // no answer: the send may have reached SES, so never resend it blindly
      [result] = await conn.query('CALL email_finalize_unknown(?, ?, ?)', [row.id, token, answer.error]);
      status = 'UnknownOutcome';
    } else { // 429 and 5xx may pass; any other 4xx will not
      const permanent = answer.status === 429 || answer.status >= 500 ? 0 : 1;
      [result] = await conn.query('CALL email_finalize_failure(?, ?, ?, ?, ?, ?)',
        [row.id, token, permanent, answer.code, answer.error.slice(0, 2000), 30 * 2 ** row.attempt_count]);
      status = result[0][0].status; // Retrying, or Failed when permanent or the attempts are used up
    }
    // affected 0: the claim was no longer ours (its lease expired): another worker owns the row now.
    done.push([row.id, result[0][0].affected === 1 ? status : 'lost', answer.body.MessageId || '-']);
  }
  return done;
}

/** SendEmail's JSON for one claimed row: a whole message from message_options, or a plain one. */
function buildRequest(row, options, attachments, defaultFrom) {
  const o = options || { to: [row.to_address] };
  const part = o.template
    ? { TemplateName: o.template.name, TemplateData: JSON.stringify(o.template.data || {}) }
    : { Subject: { Data: row.subject, Charset: 'UTF-8' }, Body: {} };
  if (!o.template && row.text_body !== null) part.Body.Text = { Data: row.text_body, Charset: 'UTF-8' };
  if (!o.template && row.html_body !== null) part.Body.Html = { Data: row.html_body, Charset: 'UTF-8' };
  if (o.headers) part.Headers = Object.entries(o.headers).map(([Name, Value]) => ({ Name, Value }));
  if (attachments.length) {
    part.Attachments = attachments.map((a) => ({
      RawContent: Buffer.from(a.content).toString('base64'),
      FileName: a.filename,
      ContentType: a.content_type,
      ContentDisposition: a.disposition.toUpperCase(),
      ContentTransferEncoding: 'BASE64',
      ...(a.content_id ? { ContentId: a.content_id } : {}),
    }));
  }
  const destination = {};
  for (const [key, member] of [['ToAddresses', 'to'], ['CcAddresses', 'cc'], ['BccAddresses', 'bcc']]) {
    if (o[member] && o[member].length) destination[key] = o[member].map(encodeMailbox);
  }
  const request = {
    FromEmailAddress: encodeMailbox(o.from || row.from_address || defaultFrom),
    Destination: destination,
    Content: o.template ? { Template: part } : { Simple: part },
    // The outbox_id tag lets SES events find the row (docs/events.md).
    EmailTags: [...Object.entries(o.tags || {}).map(([Name, Value]) => ({ Name, Value })),
      { Name: 'outbox_id', Value: String(row.id) }],
  };
  if (o.reply_to) request.ReplyToAddresses = o.reply_to.map(encodeMailbox);
  if (o.configuration_set) request.ConfigurationSetName = o.configuration_set;
  return request;
}

/** `Name <address>` as SES wants it: a non-ASCII display name as an RFC 2047 encoded word. */
function encodeMailbox(mailbox) {
  const cut = mailbox.lastIndexOf('<');
  if (!mailbox.endsWith('>') || cut < 0) return mailbox;
  const name = mailbox.slice(0, cut).trim().replace(/^"(.*)"$/, '$1');
  const address = mailbox.slice(cut);
  if (/[^\x20-\x7e]/.test(name)) return `=?utf-8?b?${Buffer.from(name).toString('base64')}?= ${address}`;
  return `"${name}" ${address}`;
}
// docs:end

/** POST the request to SESv2 SendEmail, signed with AWS Signature Version 4. */
async function sendEmail(ses, request) {
  const url = new URL('/v2/email/outbound-emails', ses.endpoint);
  const body = JSON.stringify(request);
  const amzDate = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const hash = (data) => crypto.createHash('sha256').update(data).digest('hex');
  const hmac = (key, data) => crypto.createHmac('sha256', key).update(data).digest();
  const canonical = ['POST', url.pathname, '', `content-type:application/json\nhost:${url.host}\nx-amz-date:${amzDate}\n`,
    'content-type;host;x-amz-date', hash(body)].join('\n');
  const scope = `${day}/${ses.region}/ses/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, hash(canonical)].join('\n');
  let key = hmac(`AWS4${ses.secretKey}`, day);
  for (const part of [ses.region, 'ses', 'aws4_request']) key = hmac(key, part);
  const signature = crypto.createHmac('sha256', key).update(toSign).digest('hex');
  try {
    const response = await fetch(url, {
      method: 'POST',
      body,
      signal: AbortSignal.timeout(30000),
      headers: {
        'content-type': 'application/json',
        'x-amz-date': amzDate,
        authorization: `AWS4-HMAC-SHA256 Credential=${ses.accessKey}/${scope}, `
          + `SignedHeaders=content-type;host;x-amz-date, Signature=${signature}`,
      },
    });
    const text = await response.text();
    const answer = text ? JSON.parse(text) : {};
    const code = (response.headers.get('x-amzn-errortype') || 'SesError').split(':')[0];
    return { status: response.status, body: answer, code, error: answer.message || `HTTP ${response.status}` };
  } catch (err) {
    return { status: 0, body: {}, code: 'NoAnswer', error: String(err).slice(0, 2000) };
  }
}

async function main() {
  const conn = await mysql.createConnection({
    host: process.env.OUTBOX_DB_HOST || '127.0.0.1',
    port: Number(process.env.OUTBOX_DB_PORT || 3306),
    user: process.env.OUTBOX_DB_USER,
    password: process.env.OUTBOX_DB_PASSWORD || '',
    database: process.env.OUTBOX_DB_NAME,
    supportBigNumbers: true,
  });
  const ses = {
    endpoint: process.env.OUTBOX_SES_ENDPOINT || 'https://email.us-east-1.amazonaws.com',
    region: process.env.AWS_REGION || 'us-east-1',
    accessKey: process.env.AWS_ACCESS_KEY_ID,
    secretKey: process.env.AWS_SECRET_ACCESS_KEY,
    defaultFrom: process.env.OUTBOX_DEFAULT_FROM,
  };
  try {
    for (const [id, status, messageId] of await runOnce(conn, ses, 10)) console.log(`${id} ${status} ${messageId}`);
  } finally {
    await conn.end();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
