// Mark an order paid and enqueue its receipt, PDF attached, in one transaction (docs/procedures.md).
//
//   javac -encoding UTF-8 -cp mariadb-java-client.jar:javax.json-api.jar:javax.json.jar Enqueue.java
//   java -cp .:mariadb-java-client.jar:javax.json-api.jar:javax.json.jar Enqueue ORDER_ID PDF_FILE
//
// The database comes from OUTBOX_DB_HOST, OUTBOX_DB_PORT, OUTBOX_DB_USER, OUTBOX_DB_PASSWORD and
// OUTBOX_DB_NAME. Prints `affected attempt_id`. The JDK has no JSON library: this uses JSON-P
// (javax.json, the Java EE standard API; jakarta.json is the same API renamed). MySQL Connector/J
// works the same way (jdbc:mysql://). A sender not on the allow-list exits 3.
// tests/contract/test_other_languages.py runs this file and checks that docs/procedures.md shows the
// part between the docs:start and docs:end lines unchanged.

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Base64;
import javax.json.Json;

public class Enqueue {
  // docs:start
  /** The refusal number for a from address not on this account's allow-list (docs/procedures.md, Errors). */
  static final int SENDER_NOT_ALLOWED = 45005;
  /** The refusal number for a tenant this account may not use, or a priority above its highest. */
  static final int TENANT_NOT_ALLOWED = 45012;

  static class SenderNotAllowed extends SQLException {
    SenderNotAllowed(SQLException refusal) {
      super("sender not allowed: " + refusal.getMessage(), refusal.getSQLState(), refusal.getErrorCode(), refusal);
    }
  }

  static class TenantNotAllowed extends SQLException {
    TenantNotAllowed(SQLException refusal) {
      super("tenant not allowed: " + refusal.getMessage(), refusal.getSQLState(), refusal.getErrorCode(), refusal);
    }
  }

  /** Marks the order paid and enqueues its receipt in one transaction: both commit or neither does. */
  static long[] enqueueReceipt(Connection conn, long orderId, byte[] pdf) throws SQLException {
    String message = Json.createObjectBuilder()
        .add("from", "Shop <shop@example.com>")
        .add("to", Json.createArrayBuilder().add("Ann Lee <ann@example.com>"))
        .add("cc", Json.createArrayBuilder().add("accounts@example.com"))
        .add("reply_to", Json.createArrayBuilder().add("Support <help@example.com>"))
        .add("subject", "Your receipt for order " + orderId + " 🧾")
        .add("text", "Thank you for your order. The receipt is attached.")
        .add("html", "<p>Thank you for your order. The receipt is attached.</p>")
        .add("headers", Json.createObjectBuilder()
            .add("List-Unsubscribe", "<https://example.com/unsubscribe/ann>")
            .add("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
        .add("tags", Json.createObjectBuilder().add("kind", "receipt"))
        .add("tenant", "shop") // this service's share of the outbox (docs/procedures.md, Tenants)
        .add("attachments", Json.createArrayBuilder().add(Json.createObjectBuilder()
            .add("filename", "receipt-" + orderId + ".pdf")
            .add("content_type", "application/pdf")
            .add("content_base64", Base64.getEncoder().encodeToString(pdf))))
        .build()
        .toString();
    boolean autoCommit = conn.getAutoCommit();
    conn.setAutoCommit(false);
    try (PreparedStatement order = conn.prepareStatement("UPDATE orders SET state = 'paid' WHERE id = ?");
         PreparedStatement call = conn.prepareStatement("CALL email_enqueue_message(?, ?)")) {
      order.setLong(1, orderId);
      order.executeUpdate();
      call.setString(1, "order-" + orderId + ":receipt");
      call.setString(2, message);
      long[] result = new long[2];
      try (ResultSet rs = call.executeQuery()) {
        rs.next();
        result[0] = rs.getLong("affected");    // 0: already enqueued, and attempt_id is that row
        result[1] = rs.getLong("attempt_id");
      }
      conn.commit();
      return result;
    } catch (SQLException e) {
      conn.rollback();
      // A refusal: getSQLState() "45000", getErrorCode() its rule class, getMessage() names the member and the rule.
      // MariaDB Connector/J reads the number as a signed 16-bit value (45005 arrives as -20531): mask it.
      if ((e.getErrorCode() & 0xFFFF) == SENDER_NOT_ALLOWED) {
        throw new SenderNotAllowed(e);
      }
      if ((e.getErrorCode() & 0xFFFF) == TENANT_NOT_ALLOWED) {
        throw new TenantNotAllowed(e);
      }
      throw e;
    } finally {
      conn.setAutoCommit(autoCommit);
    }
  }
  // docs:end

  public static void main(String[] args) throws Exception {
    String url = "jdbc:mariadb://" + System.getenv().getOrDefault("OUTBOX_DB_HOST", "127.0.0.1") + ":"
        + System.getenv().getOrDefault("OUTBOX_DB_PORT", "3306") + "/" + System.getenv("OUTBOX_DB_NAME");
    try (Connection conn = DriverManager.getConnection(
        url, System.getenv("OUTBOX_DB_USER"), System.getenv().getOrDefault("OUTBOX_DB_PASSWORD", ""))) {
      long[] result = enqueueReceipt(conn, Long.parseLong(args[0]), Files.readAllBytes(Path.of(args[1])));
      System.out.println(result[0] + " " + result[1]);
    } catch (SenderNotAllowed e) {
      System.err.println(e.getMessage());
      System.exit(3);
    } catch (TenantNotAllowed e) {
      System.err.println(e.getMessage());
      System.exit(4);
    }
  }
}
