"""The start-up hook ships in every install: radt-ext's wheel, built from this checkout and installed
without `-e` (`pip install --target`, the checkout nowhere on the path), counts an unmodified script as
the editable install does; an install that lacks the hook says so at the start and in the run's note,
with the fix."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from mlflow.tracking import MlflowClient

from tests.wheel import build_wheel, clean_env, install_target

HOOK = os.path.join("radt_ext", "workload_api", "autoprogress", "site", "sitecustomize.py")
SCRIPT = """
    import sys, time
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(24, 16), torch.randint(0, 4, (24,))
    samples = 0
    for step in range(40):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        samples += len(x)
        time.sleep(0.01)
    hook = sys.modules.get("radt_ext.workload_api.autoprogress")
    print("hook from", hook.__file__ if hook else None)
    print("samples", samples)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """radt-ext's wheel installed with `pip install --target`: the workloads' only PYTHONPATH below."""
    root = tmp_path_factory.mktemp("wheel")
    return install_target(build_wheel(root), root / "site")


def _run(site, tmp_path, store: str, *command: str):
    """`radt-ext run` from the installed wheel: cwd outside the checkout, the target its only PYTHONPATH."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "train.py").write_text(textwrap.dedent(SCRIPT))
    env = clean_env(PYTHONPATH=str(site), MLFLOW_TRACKING_URI=store, HOME=str(tmp_path), OMP_NUM_THREADS="1",
                    RADT_EXT_SPOOL_DIR=str(tmp_path / "spool"))
    return subprocess.run([sys.executable, *command], cwd=work, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_wheel_installed_without_e_counts_an_unmodified_script(installed, tmp_path):
    assert (installed / HOOK).is_file()
    where = _run(installed, tmp_path, "sqlite:///unused.db", "-c", "import radt_ext; print(radt_ext.__file__)")
    assert where.stdout.strip() == str(installed / "radt_ext" / "__init__.py"), where.stderr
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = _run(installed, tmp_path, store, "-m", "radt_ext.cli", "run", "--listeners", "top", "--", sys.executable,
               "train.py")
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"hook from {installed / 'radt_ext' / 'workload_api' / 'autoprogress' / '__init__.py'}" in res.stdout
    assert "samples 960" in res.stdout and "start-up hook" not in res.stderr
    (run,) = MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("Default").experiment_id])
    assert run.data.tags["radt_ext.progress_source"] == "torch", run.data.tags.get("radt_ext.progress_note")
    assert "leading dimension of the input of the model the optimizer steps" in run.data.tags["radt_ext.progress_note"]
    assert run.data.metrics["summary/e2e_samples"] == 960
    assert run.data.metrics["summary/throughput_samples_per_s"] > 0


@pytest.mark.slow
def test_an_install_without_the_hook_says_so_at_the_start_and_in_the_note(installed, tmp_path):
    broken = tmp_path / "site"
    shutil.copytree(installed, broken)
    os.remove(broken / HOOK)  # what `pip install .` left before the hook was shipped
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = _run(broken, tmp_path, store, "-m", "radt_ext.cli", "run", "--listeners", "top", "--", sys.executable,
               "train.py")
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line for line in res.stderr.splitlines() if "start-up hook" in line]
    assert len(lines) == 1 and "missing from this install" in lines[0] and "pip install" in lines[0], res.stderr
    (run,) = MlflowClient(store).search_runs([MlflowClient(store).get_experiment_by_name("Default").experiment_id])
    assert run.data.tags["radt_ext.progress_source"] == "none"
    note = run.data.tags["radt_ext.progress_note"]
    assert "missing from this install" in note and "pip install" in note and "PyTorch" not in note
    assert "summary/samples" not in run.data.metrics
