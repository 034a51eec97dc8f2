// Command enqueue marks an order paid and enqueues its receipt, PDF attached, in one transaction
// (docs/procedures.md).
//
//	go mod init example.com/enqueue && go get github.com/go-sql-driver/mysql && go run . ORDER_ID PDF_FILE
//
// The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
// OUTBOX_DB_NAME. Prints `affected attempt_id`; a sender not on the allow-list exits 3.
// tests/contract/test_other_languages.py runs this file and checks that docs/procedures.md shows the
// part between the docs:start and docs:end lines unchanged.
package main

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"

	"github.com/go-sql-driver/mysql"
)

// docs:start
// senderNotAllowed is the refusal number for a from address not on this account's allow-list
// (docs/procedures.md, Errors).
const senderNotAllowed = 45005

// tenantNotAllowed is the refusal number for a tenant this account may not use, or a priority above its highest.
const tenantNotAllowed = 45012

// ErrSenderNotAllowed and ErrTenantNotAllowed are what enqueueReceipt returns, wrapped, for those refusals.
var (
	ErrSenderNotAllowed = errors.New("sender not allowed")
	ErrTenantNotAllowed = errors.New("tenant not allowed")
)

// enqueueReceipt marks the order paid and enqueues its receipt in one transaction: both commit or neither does.
func enqueueReceipt(ctx context.Context, db *sql.DB, orderID int64, pdf []byte) (affected, attemptID int64, err error) {
	message, err := json.Marshal(map[string]any{
		"from":     "Shop <shop@example.com>",
		"to":       []string{"Ann Lee <ann@example.com>"},
		"cc":       []string{"accounts@example.com"},
		"reply_to": []string{"Support <help@example.com>"},
		"subject":  fmt.Sprintf("Your receipt for order %d 🧾", orderID),
		"text":     "Thank you for your order. The receipt is attached.",
		"html":     "<p>Thank you for your order. The receipt is attached.</p>",
		"headers": map[string]string{
			"List-Unsubscribe":      "<https://example.com/unsubscribe/ann>",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
		"tags":   map[string]string{"kind": "receipt"},
		"tenant": "shop", // this service's share of the outbox (docs/procedures.md, Tenants)
		"attachments": []map[string]string{{
			"filename":       fmt.Sprintf("receipt-%d.pdf", orderID),
			"content_type":   "application/pdf",
			"content_base64": base64.StdEncoding.EncodeToString(pdf),
		}},
	})
	if err != nil {
		return 0, 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback() // a no-op after Commit
	if _, err = tx.ExecContext(ctx, "UPDATE orders SET state = 'paid' WHERE id = ?", orderID); err != nil {
		return 0, 0, err
	}
	// affected 0: already enqueued, and attemptID is that row.
	err = tx.QueryRowContext(ctx, "CALL email_enqueue_message(?, ?)",
		fmt.Sprintf("order-%d:receipt", orderID), string(message)).Scan(&affected, &attemptID)
	if err != nil {
		// A refusal is a *mysql.MySQLError, SQLSTATE 45000: Number is its rule class, Message names the member and the rule.
		var refusal *mysql.MySQLError
		if errors.As(err, &refusal) && refusal.Number == senderNotAllowed {
			return 0, 0, fmt.Errorf("%w: %s", ErrSenderNotAllowed, refusal.Message)
		}
		if errors.As(err, &refusal) && refusal.Number == tenantNotAllowed {
			return 0, 0, fmt.Errorf("%w: %s", ErrTenantNotAllowed, refusal.Message)
		}
		return 0, 0, err
	}
	return affected, attemptID, tx.Commit()
}

// docs:end

func main() {
	cfg := mysql.NewConfig()
	cfg.User = os.Getenv("OUTBOX_DB_USER")
	cfg.Passwd = os.Getenv("OUTBOX_DB_PASSWORD")
	cfg.Net = "tcp"
	cfg.Addr = os.Getenv("OUTBOX_DB_HOST") + ":" + os.Getenv("OUTBOX_DB_PORT")
	cfg.DBName = os.Getenv("OUTBOX_DB_NAME")
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	orderID, err := strconv.ParseInt(os.Args[1], 10, 64)
	if err != nil {
		log.Fatal(err)
	}
	pdf, err := os.ReadFile(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	affected, attemptID, err := enqueueReceipt(context.Background(), db, orderID, pdf)
	if errors.Is(err, ErrSenderNotAllowed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	if errors.Is(err, ErrTenantNotAllowed) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(4)
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(affected, attemptID)
}
