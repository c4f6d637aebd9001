"""A hook of ours never harms the script: one that fails is removed with one warning line and an error
record, the script's output and exit code unchanged; a start-up hook that cannot import radt-ext says so
the same way; RADT_EXT_NO_PROGRESS=1 installs nothing; the user's own sitecustomize still runs."""
import os
import shutil

import pytest

LOOP = """
    import sys, torch, torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = 0
    for epoch in range(2):
        for x, y in DataLoader(TensorDataset(torch.randn(20, 4), torch.randn(20, 1)), batch_size=5):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            seen += len(x)
    print("seen", seen)
    sys.exit(3)
"""


@pytest.mark.parametrize("hook, left", [
    ("torch-loader", {"steps": 8, "forwards": 8, "forward_samples": 40, "step_samples": 40}),
    ("torch-steps", {"eval_batches": 8, "eval_samples": 40, "forwards": 8, "forward_samples": 40}),
    ("torch-forward", {"steps": 8, "train_batches": 8, "train_samples": 40, "epochs": 2}),
])
def test_a_failing_hook_is_removed_and_the_others_go_on(run_script, hook, left):
    ran = run_script(LOOP, env={"RADT_EXT_PROGRESS_FAULT": hook})
    assert ran.returncode == 3 and ran.stdout == "seen 40\n"
    assert ran.stderr.splitlines() == [
        f"radt-ext: progress hook {hook} failed and was removed "
        "(RuntimeError: fault injected by RADT_EXT_PROGRESS_FAULT)"]
    errors = [r for r in ran.of("torch") if "error" in r]
    assert [e["error"] for e in errors] == [f"{hook}: RuntimeError: fault injected by RADT_EXT_PROGRESS_FAULT"]
    assert ran.last("torch") == left


def test_a_batch_whose_size_probe_raises(run_script):
    ran = run_script("""
        import torch
        from torch.utils.data import DataLoader, Dataset
        class Odd:
            def __init__(self, items):
                self.items = items
            @property
            def shape(self):
                raise ValueError("no shape\\nhere")
        class Items(Dataset):
            def __len__(self):
                return 6
            def __getitem__(self, i):
                return i
        loader = DataLoader(Items(), batch_size=2, collate_fn=Odd)
        print(sum(sum(b.items) for b in loader), sum(sum(b.items) for b in loader))
    """)
    assert ran.returncode == 0 and ran.stdout == "15 15\n", ran.stderr
    assert ran.stderr == "radt-ext: progress hook torch-loader failed and was removed (ValueError: no shape here)\n"
    assert [r["error"] for r in ran.of("torch") if "error" in r] == ["torch-loader: ValueError: no shape here"]
    assert "torch-loader" in ran.stderr and not ran.totals("torch")


def test_no_progress_installs_nothing(run_script):
    code = """
        import torch
        from torch.utils.data import DataLoader
        print(DataLoader.__iter__.__module__, torch.nn.Module.__init__.__module__)
        torch.nn.Linear(2, 2)(torch.ones(1, 2))
    """
    ran = run_script(code, env={"RADT_EXT_NO_PROGRESS": "1"})
    assert ran.returncode == 0 and ran.records == []
    assert ran.stdout.split() == ["torch.utils.data.dataloader", "torch.nn.modules.module"]
    assert run_script(code, env={"RADT_EXT_NO_PROGRESS": "0"}).last("torch") == {"forwards": 1, "forward_samples": 1}


def test_the_users_sitecustomize_still_runs(run_script, tmp_path):
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = __name__\n")
    from tests.radt_ext.autoprogress.conftest import REPO, SITE_DIR

    ran = run_script("""
        import sys, sitecustomize, torch
        print(USER_SITE_RAN, sys.modules["sitecustomize"] is sitecustomize, "user_site" in sitecustomize.__file__)
        torch.nn.Linear(2, 2)(torch.ones(3, 2))
    """, env={"PYTHONPATH": ":".join([SITE_DIR, str(user), REPO])})
    assert ran.returncode == 0 and ran.stdout.split() == ["sitecustomize", "True", "True"], ran.stderr
    assert ran.last("torch") == {"forwards": 1, "forward_samples": 3}


def test_a_start_up_hook_that_cannot_import_radt_ext_says_so_and_the_script_runs(run_script, tmp_path):
    from tests.radt_ext.autoprogress.conftest import SITE_DIR

    root = tmp_path / "half_installed"
    site = root / "radt_ext" / "workload_api" / "autoprogress" / "site"
    site.mkdir(parents=True)
    shutil.copy(os.path.join(SITE_DIR, "sitecustomize.py"), site)
    (root / "radt_ext" / "__init__.py").write_text("raise ImportError('a half-installed radt_ext')\n")
    ran = run_script("print('ran')", env={"PYTHONPATH": str(site)})
    assert ran.returncode == 0 and ran.stdout == "ran\n"
    assert ran.stderr == "radt-ext: progress counting is off (ImportError: a half-installed radt_ext)\n"
    assert [(r["src"], r["error"]) for r in ran.records] == [("hook", "ImportError: a half-installed radt_ext")]
