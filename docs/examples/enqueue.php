<?php
// Mark an order paid and enqueue its receipt, PDF attached, in one transaction (docs/procedures.md).
//
//   php enqueue.php ORDER_ID PDF_FILE        (needs the pdo_mysql extension)
//
// The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
// OUTBOX_DB_NAME. Prints `affected attempt_id`; a sender not on the allow-list exits 3.
// tests/contract/test_other_languages.py runs this file and checks that docs/procedures.md shows the
// part between the docs:start and docs:end lines unchanged.
declare(strict_types=1);

// docs:start
/** The refusal number for a from address not on this account's allow-list (docs/procedures.md, Errors). */
const SENDER_NOT_ALLOWED = 45005;
/** The refusal number for a tenant this account may not use, or a priority above its highest. */
const TENANT_NOT_ALLOWED = 45012;

final class SenderNotAllowed extends RuntimeException
{
}

final class TenantNotAllowed extends RuntimeException
{
}

/** Marks the order paid and enqueues its receipt in one transaction: both commit or neither does. */
function enqueueReceipt(PDO $pdo, int $orderId, string $pdf): array
{
    $message = json_encode([
        'from' => 'Shop <shop@example.com>',
        'to' => ['Ann Lee <ann@example.com>'],
        'cc' => ['accounts@example.com'],
        'reply_to' => ['Support <help@example.com>'],
        'subject' => "Your receipt for order $orderId 🧾",
        'text' => 'Thank you for your order. The receipt is attached.',
        'html' => '<p>Thank you for your order. The receipt is attached.</p>',
        'headers' => [
            'List-Unsubscribe' => '<https://example.com/unsubscribe/ann>',
            'List-Unsubscribe-Post' => 'List-Unsubscribe=One-Click',
        ],
        'tags' => ['kind' => 'receipt'],
        'tenant' => 'shop', // this service's share of the outbox (docs/procedures.md, Tenants)
        'attachments' => [[
            'filename' => "receipt-$orderId.pdf",
            'content_type' => 'application/pdf',
            'content_base64' => base64_encode($pdf), // $pdf holds the file's bytes
        ]],
    ], JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES);
    $pdo->beginTransaction();
    try {
        $pdo->prepare("UPDATE orders SET state = 'paid' WHERE id = ?")->execute([$orderId]);
        $call = $pdo->prepare('CALL email_enqueue_message(?, ?)');
        $call->execute(["order-$orderId:receipt", $message]);
        $row = $call->fetch(PDO::FETCH_ASSOC); // affected 0: already enqueued, attempt_id is that row
        $call->closeCursor(); // the CALL's status result: drained, so the next statement can run
        $pdo->commit();
        return [(int) $row['affected'], (int) $row['attempt_id']];
    } catch (Throwable $e) {
        if ($pdo->inTransaction()) {
            $pdo->rollBack();
        }
        // A refusal is a PDOException, getCode() '45000': errorInfo[1] is its rule class, errorInfo[2] names the member and the rule.
        if ($e instanceof PDOException && (int) ($e->errorInfo[1] ?? 0) === SENDER_NOT_ALLOWED) {
            throw new SenderNotAllowed("sender not allowed: {$e->errorInfo[2]}", 0, $e);
        }
        if ($e instanceof PDOException && (int) ($e->errorInfo[1] ?? 0) === TENANT_NOT_ALLOWED) {
            throw new TenantNotAllowed("tenant not allowed: {$e->errorInfo[2]}", 0, $e);
        }
        throw $e;
    }
}
// docs:end

$pdo = new PDO(
    sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4',
        getenv('OUTBOX_DB_HOST') ?: '127.0.0.1', getenv('OUTBOX_DB_PORT') ?: '3306', getenv('OUTBOX_DB_NAME')),
    getenv('OUTBOX_DB_USER'),
    getenv('OUTBOX_DB_PASSWORD') ?: '',
    [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION],
);
try {
    [$affected, $attemptId] = enqueueReceipt($pdo, (int) $argv[1], file_get_contents($argv[2]));
} catch (SenderNotAllowed $e) {
    fwrite(STDERR, $e->getMessage() . "\n");
    exit(3);
} catch (TenantNotAllowed $e) {
    fwrite(STDERR, $e->getMessage() . "\n");
    exit(4);
}
echo "$affected $attemptId\n";
