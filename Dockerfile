# streamproc images for docker-compose.yml.
#   runtime: the package and the example topologies; runs `streamproc run <topology module> ...`
#   test:    runtime + the test extra, tests/ and scripts/; runs the integration tests against the
#            broker named by KAFKA_BOOTSTRAP_SERVERS (no Java needed: the broker is the compose one)
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY streamproc ./streamproc
COPY topologies ./topologies
# gcc only while installing: setup.py compiles the hot path with Cython (streamproc/_native.py)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
CMD ["streamproc", "--help"]

FROM runtime AS test
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install '.[test]' && rm -rf /var/lib/apt/lists/*
COPY tests ./tests
COPY scripts ./scripts
CMD ["python", "-m", "pytest", "-m", "kafka and not cluster", "tests/integration"]
