# The whole set-up on a fresh Debian/Ubuntu machine is `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# The demo and `make dev` need the package alone, not the test and benchmark extras.
DEMO_STAMP := $(VENV)/.demo-stamp

.PHONY: help test demo dev lint system-deps demo-deps clean soak bench failover costs cluster-soak console-bench faults

# A target's `## ` comment is its line in `make help`.
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The virtualenv both stamps install into, with the Python this project needs.
define make_venv
@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11+ is required ($(PYTHON) is older)"; exit 1; }
@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
endef

$(STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test,bench]"
	@touch $@

$(DEMO_STAMP): pyproject.toml
	$(make_venv)
	$(BIN)/pip install --quiet -e .
	@touch $@

# What the tests need (a database server binary and client, the benchmark's brokers, chromium, promtool,
# ...; db/ensure-server-binary.sh lists them) and what the demo needs (the database only), from
# Debian's packages when missing. Tests, benchmarks and the demo start private servers from the
# binaries, never a system service.
system-deps: ## install the system packages the tests need
	@bash db/ensure-server-binary.sh test

demo-deps: ## install the system packages the demo and `make dev` need (a database server)
	@bash db/ensure-server-binary.sh demo

test: system-deps $(STAMP) ## run the whole suite (about 15 minutes on 2 cores)
	$(BIN)/pytest

demo: demo-deps $(DEMO_STAMP) ## the whole job end to end: a private database, the local SES endpoint, 3 workers
	$(BIN)/python -m email_outbox_devtools.demo

dev: demo-deps $(DEMO_STAMP) ## a private database and the local SES endpoint to try things by hand (Ctrl-C stops)
	$(BIN)/python -m email_outbox_devtools.dev

# The full-size runs behind docs/reliability.md and docs/performance.md (minutes each; not in `test`).
soak: system-deps $(STAMP) ## the soak behind docs/reliability.md (minutes)
	$(BIN)/python bench/soak.py --seed 20261203 --isolation REPEATABLE-READ
	$(BIN)/python bench/soak.py --seed 20261203 --isolation READ-COMMITTED

bench: system-deps $(STAMP) ## throughput against the Celery peers (docs/performance.md)
	$(BIN)/python bench/throughput.py

# Failover of a semi-sync primary under 3,000 emails and 3 workers, with the accounting (docs/reliability.md).
failover: system-deps $(STAMP) ## a semi-sync primary's failover under 3,000 emails
	EMAIL_OUTBOX_FAILOVER_EMAILS=3000 $(BIN)/pytest -s -q tests/cluster/test_failover.py

# A 3-node Galera cluster soak: 3,000 emails, two node kills, an IST rejoin; accounting and throughput.
cluster-soak: system-deps $(STAMP) ## a 3-node Galera soak with node kills
	EMAIL_OUTBOX_CLUSTER_SOAK_EMAILS=3000 $(BIN)/pytest -s -q tests/cluster/test_cluster_soak.py

# The fault runs on a 3-node Galera cluster in network namespaces (docs/reliability.md, "Faults on a
# Galera cluster"): each fault and a mixed run at the documented settings, the same on a semi-sync
# primary/replica pair, then the Galera all-node kill at
# innodb_flush_log_at_trx_commit=0 (the risky row: its losses are the measurement, so its exit code is
# ignored). Needs root.
faults: system-deps $(STAMP) ## the Galera and semi-sync pair fault runs (network namespaces; root)
	$(BIN)/python bench/faults.py --seed 39
	$(BIN)/python bench/faults.py --seed 39 --pair --emails 900
	-$(BIN)/python bench/faults.py --seed 39 --phases kill_all_nodes --flush-log-at-trx-commit 0

# The queue gauge and purge-bodies at 10,000 and 1,000,000 terminal rows (docs/performance.md).
costs: system-deps $(STAMP) ## the queue gauge and purge at 10,000 and 1,000,000 rows
	$(BIN)/python bench/costs.py

# Tenants' fair share with a real worker at 50 sends/s, and the claim at 100 tenants beside 1,000,000
# terminal rows (docs/performance.md, "Tenants").
tenant-bench: system-deps $(STAMP) ## tenants' fair share and the claim at 100 tenants (minutes)
	$(BIN)/python bench/tenant_share.py

# The operator console's overview, lists and searches with 1,000,000 rows (docs/operations.md).
console-bench: system-deps $(STAMP) ## the console's pages with 1,000,000 rows
	$(BIN)/python bench/console.py

lint: $(STAMP) ## ruff check, ruff format --check, mypy
	$(BIN)/ruff check src tests db bench
	$(BIN)/ruff format --check src tests db bench
	$(BIN)/mypy

clean: ## remove the virtualenv, .demo, .dev and the caches
	rm -rf $(VENV) .demo .dev .pytest_cache .mypy_cache .ruff_cache
