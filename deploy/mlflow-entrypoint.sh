#!/bin/sh
# Start the MLflow tracking server: PostgreSQL backend store, artifacts served through the
# server, basic auth. Every setting comes from the environment (see deploy/.env.example).
# The test suite runs this same script against a throwaway PostgreSQL (tests/servers.py).
set -eu

need() {
    echo "mlflow-entrypoint: $1 is not set: copy deploy/.env.example to .env and fill it in" >&2
    exit 2
}

# psycopg2 named explicitly: SQLAlchemy 2.1 maps plain postgresql:// to psycopg 3.
if [ -z "${BACKEND_STORE_URI:-}" ] || [ -z "${AUTH_DATABASE_URI:-}" ]; then
    [ -n "${POSTGRES_PASSWORD:-}" ] || need POSTGRES_PASSWORD
    pg="postgresql+psycopg2://${POSTGRES_USER:-mlflow}:${POSTGRES_PASSWORD}@${POSTGRES_HOST:-postgres}:${POSTGRES_PORT:-5432}"
    : "${BACKEND_STORE_URI:=${pg}/${POSTGRES_DB:-mlflow}}"
    : "${AUTH_DATABASE_URI:=${pg}/${POSTGRES_AUTH_DB:-mlflow_auth}}"
fi
[ -n "${MLFLOW_AUTH_ADMIN_PASSWORD:-}" ] || need MLFLOW_AUTH_ADMIN_PASSWORD
[ -n "${MLFLOW_FLASK_SERVER_SECRET_KEY:-}" ] || need MLFLOW_FLASK_SERVER_SECRET_KEY
for value in "${POSTGRES_PASSWORD:-}" "$MLFLOW_AUTH_ADMIN_PASSWORD" "$MLFLOW_FLASK_SERVER_SECRET_KEY"; do
    if [ "$value" = "change-me" ]; then
        echo "mlflow-entrypoint: a secret in .env is still 'change-me': replace it (openssl rand -hex 24)" >&2
        exit 2
    fi
done

: "${MLFLOW_HOST:=0.0.0.0}"
: "${MLFLOW_PORT:=5000}"
: "${MLFLOW_WORKERS:=4}"
: "${MLFLOW_ARTIFACTS_DESTINATION:=/mlartifacts}"
: "${MLFLOW_AUTH_TEMPLATE:=/etc/mlflow/basic_auth.ini}"
: "${MLFLOW_AUTH_CONFIG_PATH:=/tmp/mlflow_basic_auth.ini}"
export AUTH_DATABASE_URI MLFLOW_AUTH_CONFIG_PATH

umask 077
python -c 'import os, string, sys; sys.stdout.write(string.Template(open(sys.argv[1]).read()).substitute(os.environ))' \
    "$MLFLOW_AUTH_TEMPLATE" > "$MLFLOW_AUTH_CONFIG_PATH"

exec mlflow server \
    --app-name basic-auth \
    --backend-store-uri "$BACKEND_STORE_URI" \
    --serve-artifacts --artifacts-destination "$MLFLOW_ARTIFACTS_DESTINATION" \
    --host "$MLFLOW_HOST" --port "$MLFLOW_PORT" --workers "$MLFLOW_WORKERS" \
    "$@"
