# Garante's image: one image for every process (bin/garante web|worker|beat|migrate), as
# compose.yaml runs them. Every dependency installs from a wheel (--only-binary), so neither
# stage has or needs a compiler; the static files are collected at build time and served by
# the app itself (WhiteNoise). docs/operations.md.
ARG PYTHON_VERSION=3.12

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY requirements.txt ./
RUN python -m venv .venv && .venv/bin/pip install --only-binary=:all: -r requirements.txt
COPY . .
# collectstatic reads the settings, which refuse to load without a real key and a host: a
# throwaway key, used for nothing else and gone with this stage.
RUN DJANGO_SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    DJANGO_ALLOWED_HOSTS=build .venv/bin/python manage.py collectstatic --no-input -v 0 \
    && mkdir -p var/beat \
    && .venv/bin/python -m compileall -q config core tooling integration agenda sales support

FROM python:${PYTHON_VERSION}-slim
RUN groupadd --system --gid 10001 garante \
    && useradd --system --uid 10001 --gid garante --home-dir /app --no-create-home garante
WORKDIR /app
COPY --from=build --chown=garante:garante /app /app
USER garante
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 GARANTE_WEB_BIND=0.0.0.0:8000
EXPOSE 8000
# No HEALTHCHECK here: the same image runs the web, the worker and beat, whose checks differ
# (compose.yaml: /readyz for the web, `bin/garante ready` for the others).
ENTRYPOINT ["bin/garante"]
CMD ["web"]
