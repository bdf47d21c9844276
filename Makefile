# Garante — set-up, demo, tests and benchmarks. Everything installs into .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SPEEDUPS_STAMP := $(VENV)/.speedups-stamp

.PHONY: install speedups demo test test-fast lint format bench clean conformance \
	conformance-install axe-install cluster cluster-stop cluster-restart cluster-manage cluster-test soak \
	mutate mutate-ratchet

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

# Optional compiled speed-ups (requirements-speedups.txt), which may need a C compiler;
# everything works without them. `make bench` measures what each is worth.
$(SPEEDUPS_STAMP): $(STAMP) requirements-speedups.txt
	$(BIN)/pip install --quiet -r requirements-speedups.txt
	touch $(SPEEDUPS_STAMP)

speedups: $(SPEEDUPS_STAMP)

# Migrations, the sandbox, the server on 127.0.0.1:8000; its output goes to var/demo.log and
# the terminal ends with the URLs, the gateway token, the admin login and a curl (bin/demo).
demo: install
	bin/demo

# Two pytest-xdist workers (the machine has two cores; most of the suite waits on servers,
# not on the CPU), each with a test database of its own (test_<name>_gw0, _gw1); a module runs
# on one worker, and tests/conftest.py's XDIST_GROUPS keeps apart what must not run together.
# PYTEST_XDIST="" runs in one process.
PYTEST_XDIST ?= -n 2 --dist loadgroup

test: install axe-install
	$(BIN)/pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The inner loop: everything but the tests that start real servers or flush the database
# (marked slow by tests/conftest.py).
test-fast: install
	$(BIN)/pytest -m "not slow" $(PYTEST_XDIST) $(PYTEST_ARGS)

# The misbehaving Gateway of tests/properties for as long as asked (minutes; `make test` runs a
# bounded run of it): seeded runs one after another until the time is up or a counterexample
# is found; the report (steps, rules hit, counterexample) is printed and left in
# var/soak-report.json. One process, its own test database (test_<DATABASE_URL's name>).
GARANTE_SOAK_MINUTES ?= 60

soak: install
	GARANTE_SOAK_MINUTES=$(GARANTE_SOAK_MINUTES) $(BIN)/pytest tests/properties/test_soak.py \
		-p no:cacheprovider -p no:xdist -q -s $(PYTEST_ARGS)

# Mutation testing of the guarantee modules (mutmut; docs/testing.md): one line per module, then
# `mutation score: K killed of N (P %)`. PATHS="core/identity/ownership.py ..." runs only those;
# a second run tests again only what changed. MUTATE_JOBS mutants at once, each test session
# with a test database of its own. Results stay in var/mutate/.
PATHS ?=
MUTATE_JOBS ?= 2

mutate: install
	$(BIN)/python -m tests.mutation.run --jobs $(MUTATE_JOBS) $(PATHS)

# The mutation ratchet (docs/testing.md): the guarantee modules changed since BASE run again,
# and one that scores below its record in tests/mutation/scores.json fails. CI runs it with
# RATCHET="--since-record": the modules whose source is not the one their record was measured on.
BASE ?= main
RATCHET ?= --base $(BASE)

mutate-ratchet: install
	$(BIN)/python -m tests.mutation.ratchet $(RATCHET) --jobs $(MUTATE_JOBS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The official MCP conformance suite (docs/conformance.md), pinned in tests/conformance/package.json
# with the Node 22 binary it needs; npm itself may be older. No lock file: it would name the
# registry host.
CONFORMANCE_DIR := tests/conformance
CONFORMANCE_STAMP := $(CONFORMANCE_DIR)/node_modules/.installed-stamp

$(CONFORMANCE_STAMP): $(CONFORMANCE_DIR)/package.json
	cd $(CONFORMANCE_DIR) && npm install --no-package-lock --no-audit --no-fund \
		--loglevel=error --engine-strict=false
	touch $(CONFORMANCE_STAMP)

conformance-install: $(CONFORMANCE_STAMP)

# axe-core, the accessibility engine the browser tests inject into the customer pages
# (tests/accessibility/axe.py), pinned in tests/accessibility/package.json. The tests install it
# themselves when it is missing; `make test` does it first, once.
AXE_DIR := tests/accessibility
AXE_STAMP := $(AXE_DIR)/node_modules/.installed-stamp

$(AXE_STAMP): $(AXE_DIR)/package.json
	cd $(AXE_DIR) && npm install --no-package-lock --no-audit --no-fund --loglevel=error
	touch $(AXE_STAMP)

axe-install: $(AXE_STAMP)

# Seeds a sandbox database, starts gunicorn and the bearer proxy, runs each applicable scenario.
conformance: install conformance-install
	$(BIN)/python -m tests.conformance.run

# What the bench runs besides Python, from Debian when missing (command:package): wrk sends the
# load, PgBouncer and nginx make its two-node row's cluster (deploy/cluster.py).
BENCH_TOOLS = wrk:wrk pgbouncer:pgbouncer nginx:nginx

# GARANTE_BENCH_QUICK=1 make bench: short windows, no memory top-up and no growth loads;
# GARANTE_BENCH_SCENARIOS and GARANTE_BENCH_OFF choose rows (docs/performance.md).
bench: install
	@$(MAKE) --no-print-directory speedups || \
		echo "the speed-ups could not be installed (a C compiler?): the bench measures without them"
	$(BIN)/python bench/idempotency.py
	@missing=; for pair in $(BENCH_TOOLS); do \
		command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	[ -z "$$missing" ] || apt-get install -y -qq $$missing >/dev/null 2>&1 || \
		{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $$missing >/dev/null 2>&1; } || \
		echo "could not install$$missing: bench/load.py skips the load scenarios without wrk"
	$(BIN)/python bench/load.py

# A scaled-out Garante on local ports (deploy/cluster.py, docs/scaling.md): PgBouncer in
# transaction pooling in front of the machine's PostgreSQL, two gunicorn nodes behind nginx, a
# Celery worker per node and one beat on Redis. Prints the URLs and a gateway token (kept from
# one start to the next); files and logs in var/cluster/. It reads variables of its own
# (GARANTE_CLUSTER_DATABASE_URL, default database garante_cluster), never DATABASE_URL.
# `make cluster-stop` ends exactly what it started.
cluster: install
	$(BIN)/python -m deploy.cluster start

cluster-stop:
	$(BIN)/python -m deploy.cluster stop

# One part stopped gracefully and started again: NAME=node1, node2, worker1, worker2, beat,
# pgbouncer or nginx.
cluster-restart:
	$(if $(NAME),,$(error usage: make cluster-restart NAME=node1|node2|worker1|worker2|beat|pgbouncer|nginx))
	$(BIN)/python -m deploy.cluster restart $(NAME)

# manage.py against the cluster's database, with its settings: make cluster-manage ARGS="shell".
cluster-manage:
	$(if $(ARGS),,$(error usage: make cluster-manage ARGS="createsuperuser"))
	$(BIN)/python -m deploy.cluster manage $(ARGS)

# The cluster's tests (tests/cluster): they start their own cluster on free ports and drive
# it over HTTP. Not part of `make test` (a few minutes of their own); CI runs them after it.
cluster-test: install
	$(BIN)/pytest tests/cluster -p no:cacheprovider $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) db.sqlite3 .pytest_cache .ruff_cache
