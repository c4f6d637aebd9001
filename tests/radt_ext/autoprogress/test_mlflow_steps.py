"""MLflow metric steps counted from inside an unmodified script: steps = the highest step logged + 1."""


def test_steps_are_the_highest_logged_step_plus_one(run_script):
    ran = run_script("""
        import mlflow
        from mlflow.tracking import MlflowClient
        with mlflow.start_run() as run:
            for step in range(10):
                mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
            mlflow.log_metrics({"acc": 0.5, "f1": 0.4}, step=4)  # lower: no change
            mlflow.log_param("lr", 0.1)
            print(len(MlflowClient().get_metric_history(run.info.run_id, "loss")))
    """)
    assert ran.returncode == 0 and ran.stdout.strip() == "10", ran.stderr
    assert ran.last("mlflow-steps") == {"steps": 10}
    steps = [r["steps"] for r in ran.of("mlflow-steps") if "steps" in r]
    assert steps == sorted(steps) and steps[0] == 1
    assert sum(1 for r in ran.of("mlflow-steps") if r.get("hooked")) == 1


def test_a_failing_mlflow_hook_leaves_the_calls_unchanged(run_script):
    ran = run_script("""
        import mlflow
        from mlflow.tracking import MlflowClient
        with mlflow.start_run() as run:
            for step in range(3):
                mlflow.log_metric("loss", float(step), step=step)
            history = MlflowClient().get_metric_history(run.info.run_id, "loss")
            print(sorted((m.step, m.value) for m in history))
    """, env={"RADT_EXT_PROGRESS_FAULT": "mlflow-steps"})
    assert ran.returncode == 0 and ran.stdout.strip() == "[(0, 0.0), (1, 1.0), (2, 2.0)]"
    assert [line for line in ran.stderr.splitlines() if line.startswith("radt-ext:")] == [
        "radt-ext: progress hook mlflow-steps failed and was removed "
        "(RuntimeError: fault injected by RADT_EXT_PROGRESS_FAULT)"]
    assert not ran.totals("mlflow-steps") and [r for r in ran.of("mlflow-steps") if "error" in r]
