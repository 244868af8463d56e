# changefeed: the two commands a newcomer runs are `make run` and `make test`.
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
DB ?= demo-db

.PHONY: setup pg-clients cql-clients build-tools browser kafka-broker run test test-fast soak lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[spark,dev]'
	touch $@

setup: $(VENV)/.installed pg-clients cql-clients build-tools browser kafka-broker

# CQL endpoint tests: cqlsh and scylla-driver come from PyPI with the dev extra; ScyllaDB's CDC
# library scylla-cdc-go is built from tests/cdc_go (pinned by its go.mod/go.sum, fetched through the
# Go module proxy) into build/cdcprint. Needs Go >= 1.25 on PATH (the polyglot machines have it).
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
build/cdcprint: tests/cdc_go/main.go tests/cdc_go/go.mod tests/cdc_go/go.sum
	@test -x "$(GO)" || (echo "ERROR: Go >= 1.25 is needed to build tests/cdc_go (scylla-cdc-go)" >&2; exit 1)
	cd tests/cdc_go && GOPATH=$(CURDIR)/build/go GOCACHE=$(CURDIR)/build/go-cache GOFLAGS=-mod=readonly GOTOOLCHAIN=local $(GO) build -o $(CURDIR)/build/cdcprint .

cql-clients: build/cdcprint

# The crash-consistency tests build an LD_PRELOAD shim (tests/crashfs) with the C compiler;
# benchmarks/pgbench_bench.py runs PostgreSQL's server and pgbench from Debian's packages.
build-tools:
	@command -v cc >/dev/null || (apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q gcc libc6-dev) || echo "WARNING: could not install gcc; the crash tests will fail"
	@command -v pgbench >/dev/null && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || (apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q postgresql) || echo "WARNING: could not install postgresql; benchmarks/pgbench_bench.py and the pgbench tests need it"

# Apache Kafka's broker, Java clients and tools (issue 19), pinned in tools/kafka-broker/pom.xml and
# copied with their dependencies into build/kafka/libs. The Kafka tests and benchmarks start a
# KRaft broker from these jars; a Maven failure fails the set-up (no test skips for lack of them).
KAFKA_LIBS := build/kafka/libs
kafka-broker: $(KAFKA_LIBS)/.fetched

$(KAFKA_LIBS)/.fetched: tools/kafka-broker/pom.xml
	@command -v java >/dev/null || (apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q openjdk-17-jre-headless)
	@command -v mvn >/dev/null || (apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q maven)
	rm -rf $(KAFKA_LIBS)
	mvn -q -B -f tools/kafka-broker/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)
	@test -f $(KAFKA_LIBS)/kafka_2.13-4.4.0.jar || (echo "ERROR: Maven did not fetch Apache Kafka's jars into $(KAFKA_LIBS)" >&2; exit 1)
	touch $@

# PostgreSQL endpoint tests: psql and the JDBC driver from Debian (skipped loudly when absent).
pg-clients:
	@command -v psql >/dev/null || (apt-get update -q && apt-get install -y -q postgresql-client) || echo "WARNING: could not install postgresql-client; psql tests will be skipped"
	@test -e /usr/share/java/postgresql.jar || (apt-get update -q && apt-get install -y -q libpostgresql-jdbc-java) || echo "WARNING: could not install libpostgresql-jdbc-java; JDBC tests will be skipped"

# The console's tests drive Debian's headless Chromium (tests/test_node_http.py); they fail loudly without it.
browser:
	@command -v chromium >/dev/null || (apt-get update -q && apt-get -o DPkg::Lock::Timeout=600 install -y -q chromium chromium-driver) || echo "WARNING: could not install chromium; the console tests will fail"

# The main job on the embedded default: a fresh database with tables and a YDB changefeed,
# changes written in both dialects, the Spark pipeline run until idle, and the topic read back.
run: setup
	$(BIN)/changefeed demo --db $(DB)
	$(BIN)/changefeed run --db $(DB) --until-idle
	$(BIN)/changefeed feeds --db $(DB)
	$(BIN)/changefeed read --db $(DB) orders/updates --from-beginning --json
	$(BIN)/changefeed read --db $(DB) office_dogs --from-beginning --json

test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not soak" --durations=15

# The soaks: ten kill -9s of a CockroachDB job's run, five of the Phoenix CDC stream, 100,000
# Kafka produces across three endpoint restarts, 32 pgbench clients for 10 minutes through the
# PostgreSQL endpoint, 20 rounds of power loss under a committing writer (tests/crashfs).
soak: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -m soak

test-fast: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider -m "not slow and not spark"

lint: setup
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/engine_bench.py
	$(BIN)/python benchmarks/pipeline_bench.py
	# avro: encoding (loop / Python / Spark) and schema registry lookups
	$(BIN)/python benchmarks/avro_bench.py

clean:
	rm -rf $(VENV) $(DB) build dist src/*.egg-info
