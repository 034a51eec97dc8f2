"""The worker: claims rows, sends each through the provider, and finalizes it.

Its parts, each with one job (docs/design.md section 8):

- `loop.ClaimLoop`: claims only as many rows as there are free send slots and rate tokens;
- `actions.action_for`: the pure table from a provider outcome to a database step;
- `delivery.Delivery`: one claimed row, from loading its bodies to handing the step to the finalizer;
- `pacing.Pacer`: the send rate and the replica's pauses;
- `finalizer.Finalizer`: the only caller of the finalize and release procedures;
- `database.DatabaseCalls`: every procedure call, with the one retry policy;
- `startup`: the checks before the first claim, and the metrics server;
- `process.Worker`: puts the parts together and answers signals.
"""

from email_outbox.worker.process import REQUIRED_PROCEDURES, Sender, Worker

__all__ = ["REQUIRED_PROCEDURES", "Sender", "Worker"]
