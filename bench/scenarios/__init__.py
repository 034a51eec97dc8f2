"""The scenarios bench/throughput.py runs, one module each; each returns figures, none prints a table.

- outbox: N emails from a backlog through R worker replicas x concurrency C until drained
  (emails/s, statements and CPU per email, the database's CPU, peak RSS), and the paced
  enqueue-to-sent latency;
- bare: plain boto3 `send_email` from R processes x C threads, no store: the ceiling;
- celery: the Celery 5 peer on a private broker, Redis (in memory) or RabbitMQ (durable);
- peers: every system at one latency, in rotating rounds, and the table's medians;
- claim_paths: the database path alone, the per-row claim of the original design against the batch;
- enqueue: CALL email_enqueue per second on 1 and 8 connections;
- table_size: the claim rate with an empty table and with many terminal rows.
"""
