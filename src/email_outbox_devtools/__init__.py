"""Local stand-ins for production infrastructure: a private database server and an SES endpoint.

Used by the tests, `make demo`, the soak and the benchmarks. Nothing here runs in production.
"""
