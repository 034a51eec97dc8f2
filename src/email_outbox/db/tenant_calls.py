"""The calls about tenants (email_tenant_*): a part of OutboxRepository, kept apart like the
send-rate calls."""

from __future__ import annotations

# The rows migration 0017 starts with: the shared default tenant (id 1, every row enqueued before
# tenants and every message that names none, from an account with no default of its own), which
# every account may use, and the claim's fair-share clock at 0.
DEFAULT_TENANT = "default"
INITIAL_TENANT_ROWS = (
    "INSERT IGNORE INTO email_tenants (id, name, created_at, updated_at)"
    " VALUES (1, 'default', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
    "INSERT IGNORE INTO email_tenant_accounts (account, tenant_id) VALUES ('*', 1)",
    "INSERT IGNORE INTO email_tenant_schedule (id, virtual_time) VALUES (1, 0)",
)
