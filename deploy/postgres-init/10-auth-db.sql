-- Runs once, when the postgres container initialises an empty data volume: the basic-auth app
-- keeps its users and permissions in their own database next to the tracking store.
CREATE DATABASE mlflow_auth;
