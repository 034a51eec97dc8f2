"""Amazon SES: the SendEmail client and what each of its outcomes means for a row."""
