# Horismos service image: `docker compose up` runs it next to PostgreSQL (docker-compose.yml).
# Two stages: the first builds Horismos's wheel, the second installs the runtime lock and that
# wheel (not editable): no compiler, source tree or dev tool in the image.
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY requirements/build.txt ./requirements/
RUN pip install --require-hashes --no-deps -r requirements/build.txt
COPY pyproject.toml README.md ./
COPY app ./app
COPY adapters ./adapters
COPY toolkits ./toolkits
COPY ontologies ./ontologies
COPY migrations ./migrations
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin horismos

# The exact versions and hashes of requirements/runtime.txt, then the wheel without resolving.
COPY requirements/runtime.txt /tmp/runtime.txt
RUN pip install --require-hashes --no-deps -r /tmp/runtime.txt && rm /tmp/runtime.txt
COPY --from=build /wheels /tmp/wheels
RUN pip install --no-deps /tmp/wheels/*.whl && pip check && rm -rf /tmp/wheels

USER horismos
WORKDIR /home/horismos
ENV HORISMOS_DATABASE_URL=sqlite:////home/horismos/horismos.db
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

# Migrate first: the schema changes only through Alembic, and the service needs it current.
ENTRYPOINT ["/bin/sh", "-c", "horismos db upgrade && exec horismos serve --host 0.0.0.0 --port 8000"]
