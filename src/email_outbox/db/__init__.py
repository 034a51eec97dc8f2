"""The database: DSNs, connections and what their errors mean, and the repository of typed CALLs
that is the only code talking SQL to the outbox."""
