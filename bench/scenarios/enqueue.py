"""Enqueue: CALL email_enqueue per second on k connections, one transaction each."""

from __future__ import annotations

import threading
import time

import mysql.connector
from harness import Bench


def run_enqueue(bench: Bench, connections: int, seconds: float) -> float:
    dsn = bench.fresh_database()
    stop = threading.Event()
    made = [0] * connections

    def loop(k: int) -> None:
        conn = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
        cur = conn.cursor()
        i = 0
        while not stop.is_set():
            conn.start_transaction()
            cur.execute(
                "CALL email_enqueue(%s, 'a@example.com', NULL, 's', 't', NULL, NULL, NULL)", (f"enq-{k}-{i}",)
            )
            cur.fetchall()
            while cur.nextset():
                pass
            conn.commit()
            i += 1
        made[k] = i
        conn.close()

    threads = [threading.Thread(target=loop, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    return sum(made) / seconds
