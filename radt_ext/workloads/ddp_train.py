"""A small data-parallel training job for torchrun: every rank trains one copy of an MLP on its own GPU
(NCCL; gloo on the CPU where there is no GPU) and rank 0 opens its own MLflow run, as a script does.

    radt-ext run -l nvml,gpm,gpu_procs,top -- \\
        python -m torch.distributed.run --standalone --nproc_per_node 2 -m radt_ext.workloads.ddp_train --seconds 15

Rank 0 logs params, the loss every --log-every steps and the samples of all ranks as progress.
"""
from __future__ import annotations

import argparse
import os
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--width", type=int, default=4096, help="hidden width (GPU); the CPU uses 256")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--experiment", default=None, help="the experiment of rank 0's run (default: the one given)")
    args = ap.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    width = args.width if cuda else 256
    dtype = torch.bfloat16 if cuda else torch.float32
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width),
                                torch.nn.GELU(), torch.nn.Linear(width, 10)).to(device=device, dtype=dtype)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(args.batch_size, width, device=device, dtype=dtype)
    y = torch.randint(0, 10, (args.batch_size,), device=device)

    run = None
    if rank == 0:
        import mlflow

        from radt_ext.workload_api.progress import log_progress

        if args.experiment:
            mlflow.set_experiment(args.experiment)
        run = mlflow.start_run(run_name="ddp_train")
        mlflow.log_params({"workload": "ddp_train", "world_size": world, "batch_size": args.batch_size,
                           "width": width, "device": torch.cuda.get_device_name(local_rank) if cuda else "cpu"})
    dist.barrier()  # rank 0's MLflow start-up is not training time for the others
    start = time.time()
    step = 0
    while True:
        done = torch.tensor([float(time.time() - start >= args.seconds)], device=device)
        dist.all_reduce(done)  # every rank stops at the same step
        if done.item() > 0:
            break
        loss = torch.nn.functional.cross_entropy(ddp(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if rank == 0:
            log_progress(samples=args.batch_size * world, steps=1)
            if step % args.log_every == 0:
                mlflow.log_metric("loss", loss.item(), step=step)
    if cuda:
        torch.cuda.synchronize()
    if rank == 0:
        mlflow.log_metrics({"steps": step, "samples_per_s": step * args.batch_size * world / (time.time() - start)})
        mlflow.end_run()
        print(f"ddp_train: rank 0 run {run.info.run_id}, {step} steps on {world} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
