"""A 2-process DDP job (gloo on the CPU, started by torchrun): each rank is a process that counts its own
shard of the data under its own pid."""
import pytest


@pytest.mark.slow
def test_each_rank_counts_its_shard(run_script, tmp_path):
    ran = run_script("""
        import os, torch, torch.distributed as dist, torch.nn as nn
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
        dist.init_process_group("gloo")
        data = TensorDataset(torch.randn(40, 4), torch.randn(40, 1))
        sampler = DistributedSampler(data)
        loader = DataLoader(data, batch_size=6, sampler=sampler)  # 20 a rank: 6, 6, 6, 2
        model = DistributedDataParallel(nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            sampler.set_epoch(epoch)
            for x, y in loader:
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
        with open(f"rank{dist.get_rank()}.pid", "w") as out:
            out.write(str(os.getpid()))
        del model, opt  # DDP's reducer lets go of the process group before it is destroyed
        dist.barrier()
        dist.destroy_process_group()
    """, launcher=["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"], timeout=240)
    assert ran.returncode == 0, ran.stderr
    ranks = {int((tmp_path / f"rank{r}.pid").read_text()) for r in (0, 1)}
    totals = {pid: t for pid, t in ran.totals("torch").items() if t.get("steps")}
    assert set(totals) == ranks and len(ranks) == 2
    for t in totals.values():
        assert (t["steps"], t["train_batches"], t["train_samples"], t["epochs"]) == (8, 8, 40, 2)
        assert (t["forwards"], t["forward_samples"]) == (8, 40)  # the DDP module, not the model inside it
    assert sum(t["train_samples"] for t in totals.values()) == 2 * 40
    for pid in ranks:
        assert [(r["epoch"], r["event"]) for r in ran.of("torch", pid) if "epoch" in r] == [
            (1, "start"), (1, "end"), (2, "start"), (2, "end")]
    ran.assert_epoch_totals("torch", [20] * 2)  # each rank: its shard an epoch
