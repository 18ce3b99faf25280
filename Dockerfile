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
COPY pyproject.toml README.md ./
COPY streamproc ./streamproc
COPY topologies ./topologies
RUN pip install .
CMD ["streamproc", "--help"]

FROM runtime AS test
RUN pip install '.[test]'
COPY tests ./tests
COPY scripts ./scripts
CMD ["python", "-m", "pytest", "-m", "kafka and not cluster", "tests/integration"]
