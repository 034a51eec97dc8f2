"""CPU per SendEmail call: the boto3 sesv2 client against the lean client (email_outbox.ses.lean_client).

One thread, the local SES endpoint in this process at 0 ms latency, the worker's own request for a
typical email (text and HTML, one tag). The two clients take turns in blocks so that drift in the
machine's speed falls on both alike. Only the sending thread's CPU counts (time.thread_time), not the
endpoint's threads.

    .venv/bin/python bench/ses_client.py [--sends 2000] [--block 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

from email_outbox.models import ClaimedEmail
from email_outbox.ses.sender import build_request, make_client, make_send_client
from email_outbox.worker.config import load_config
from email_outbox_devtools.ses_endpoint import SesEndpoint


def cpu_per_call_us(client: Any, request: dict[str, Any], n: int) -> float:
    started = time.thread_time()
    for _ in range(n):
        client.send_email(**request)
    return (time.thread_time() - started) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=2000, help="sends per client")
    parser.add_argument("--block", type=int, default=200, help="sends per turn")
    args = parser.parse_args()
    with SesEndpoint() as endpoint:
        os.environ.update(
            {
                "AWS_ENDPOINT_URL_SESV2": endpoint.url,
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
            }
        )
        config = load_config({"dsn": "mysql://u:p@127.0.0.1:3306/db", "ses_client": "lean"})
        clients = {"boto3": make_client(config), "lean": make_send_client(config)}
        email = ClaimedEmail(
            1, "n-1", "user@example.com", "shop@example.com", "subject", "hello", "<p>hello</p>", 0, 5
        )
        request = build_request(email, None, None)
        for client in clients.values():  # connections, credentials and lazy imports before timing
            cpu_per_call_us(client, request, 50)
        samples: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(max(1, args.sends // args.block)):
            for name, client in clients.items():
                samples[name].append(cpu_per_call_us(client, request, args.block))
        accepted = len(endpoint.accepted())
    for name, values in samples.items():
        print(
            f"{name:6s} {statistics.mean(values):7.1f} us CPU per send_email"
            f" (median of blocks {statistics.median(values):.1f}, {len(values) * args.block} sends)"
        )
    boto3_us, lean_us = (statistics.mean(samples[n]) for n in ("boto3", "lean"))
    print(f"lean saves {boto3_us - lean_us:.1f} us per send ({boto3_us / lean_us:.1f}x less CPU)")
    print(f"endpoint accepted {accepted} messages")


if __name__ == "__main__":
    main()
