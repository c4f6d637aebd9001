# MLflow tracking server image for docker-compose.yml: MLflow with the basic-auth app and the
# PostgreSQL driver. Built by `docker compose build` / `up --build`.
FROM python:3.11-slim

RUN pip install --no-cache-dir "mlflow[auth]==3.17.2" "psycopg2-binary>=2.9,<3"

COPY basic_auth.ini /etc/mlflow/basic_auth.ini
COPY mlflow-entrypoint.sh /usr/local/bin/mlflow-entrypoint

RUN useradd --create-home --uid 10001 mlflow \
    && mkdir -p /mlartifacts && chown mlflow /mlartifacts
USER mlflow
WORKDIR /home/mlflow
EXPOSE 5000
ENTRYPOINT ["mlflow-entrypoint"]
