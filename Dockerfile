# Horismos service image: `docker compose up` runs it next to PostgreSQL (docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin horismos

WORKDIR /srv/horismos
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY adapters ./adapters
COPY ontologies ./ontologies
COPY migrations ./migrations
# Installed in place (editable): the migrations and bundled ontologies are found next to the
# package, exactly as in a source checkout.
RUN pip install -e . && chmod -R a+rX /srv/horismos

USER horismos
ENV HORISMOS_DATABASE_URL=sqlite:////home/horismos/horismos.db
EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]

# Migrate first: the schema changes only through Alembic, and the service needs it current.
ENTRYPOINT ["/bin/sh", "-c", "horismos db upgrade && exec horismos serve --host 0.0.0.0 --port 8000"]
