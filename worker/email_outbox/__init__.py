"""email-outbox: a MySQL-backed transactional outbox that delivers email through Amazon SES."""

__version__ = "0.1.0"
