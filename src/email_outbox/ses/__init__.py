"""Amazon SES: the SendEmail client and what each of its outcomes means for a row."""

# The provider's name in the breaker row every replica shares (email_breaker_state).
PROVIDER = "ses"
