"""SES event ingestion: what happened after SES accepted a message.

`email-outbox events` reads SES event records (SQS, or a file), unwraps the envelope they came in
(`envelopes`), turns each record into the fields the stored procedure `email_record_provider_event`
takes (`records`), and records a batch of them in one transaction (`ingest`). `sqs` is the long-poll
loop, `files` the one-shot reader, `suppression_cli` and `events_cli` the commands.
"""

from email_outbox.events.envelopes import MalformedMessage, records_in
from email_outbox.events.ingest import Ingestor, Tally
from email_outbox.events.records import ProviderEvent, events_of

__all__ = ["Ingestor", "MalformedMessage", "ProviderEvent", "Tally", "events_of", "records_in"]
