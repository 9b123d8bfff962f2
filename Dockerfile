# Horismos service image: `docker compose up` runs it next to PostgreSQL (docker-compose.yml).
# Three stages: the first fetches the HL7 Terminology package (npm, checked against its pinned
# sha512 by scripts/install-terminology), the second builds Horismos's wheel, the third installs
# the runtime lock, that wheel (not editable) and the package's files: no compiler, Node, source
# tree or dev tool in the image.
FROM node:20-slim AS terminology
COPY scripts/install-terminology /src/scripts/install-terminology
RUN /src/scripts/install-terminology /terminology/packages

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
# Where the installed service looks for it (app/resources.py: <prefix>/share/horismos), indexed
# as `make terminology` does; nothing is downloaded when the service runs.
COPY --from=terminology /terminology/packages /usr/local/share/horismos/terminology/packages
RUN python -m app.terminology build

USER horismos
WORKDIR /home/horismos
ENV HORISMOS_DATABASE_URL=sqlite:////home/horismos/horismos.db
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

# Migrate first: the schema changes only through Alembic, and the service needs it current.
ENTRYPOINT ["/bin/sh", "-c", "horismos db upgrade && exec horismos serve --host 0.0.0.0 --port 8000"]
