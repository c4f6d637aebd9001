"""The PyTorch training entry point every torch recipe calls:

    python -m radt_ext.workloads.torch_train --recipe cnn_pruned --variant pruned --model resnet18 ...

It trains under the session's listeners (it never samples hardware itself), reports
progress with `radt_ext.log_progress` every step, and records params, tags, per-epoch
and end metrics in the MLflow run it was handed (see `settings` and `records`).
"""
from __future__ import annotations

import contextlib
import json
import random
import time

import click

from . import settings

VARIANTS = ("baseline", "amp", "compiled", "pruned", "quantized")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
FAMILY = settings.Family("cnn", half_variant="amp", compile_variant="compiled", compile_mode="default")


@click.command(context_settings={"show_default": True})
@click.option("--recipe", default="", help="recipe name for the `recipe` tag (default cnn_<variant>)")
@click.option("--variant", type=click.Choice(VARIANTS), default="baseline")
@click.option("--model", "model_name", default="small_cnn")
@click.option("--dataset", default="synthetic32", help="synthetic32, synthetic224, digits, digits8 or clicks")
@click.option("--train-samples", type=click.IntRange(1), default=2048, help="synthetic/clicks training set size")
@click.option("--precision", default="", help="fp32 (TF32 convs, PyTorch default), fp32-strict, tf32, bf16, fp16")
@click.option("--channels-last", type=bool, default=False)
@click.option("--compile-mode", type=click.Choice(COMPILE_MODES), default=None)
@click.option("--compile-backend", default="inductor")
@click.option("--prune-method", default="unstructured", help="unstructured, structured or semi24")
@click.option("--quant-scheme", default="static_int8", help="static_int8, dynamic_int8 or fp8")
@click.option("--device", "device_req", default="auto", help="auto, cpu or cuda[:N]")
@click.option("--num-tables", type=click.IntRange(1), default=26)
@click.option("--table-rows", type=click.IntRange(2), default=100_000)
@click.option("--embedding-dim", type=click.IntRange(1), default=64)
@settings.shared_options
def main(**opts) -> None:
    from .startup import Startup

    startup = Startup()
    cfg = _settle(opts)
    import torch  # after argument checks, so bad input fails fast

    from . import pruning, quantization
    from .records import RunRecord, say
    from .torch_device import pick_device

    startup.mark("import")

    device = pick_device(cfg["device_req"])
    refusal = None
    if cfg["variant"] == "pruned" and cfg["prune_method"] == "semi24":
        refusal = pruning.semi24_refusal(device)
    if cfg["variant"] == "quantized":
        refusal = quantization.refusal(cfg["quant_scheme"], device)
    if cfg["compile_mode"] in ("reduce-overhead",) and device.type != "cuda":
        say("compile_mode=reduce-overhead uses CUDA graphs, which apply only on a GPU; compiling without them")
    if refusal:
        raise click.ClickException(refusal)
    torch.manual_seed(cfg["seed"])
    random.seed(cfg["seed"])
    with RunRecord(cfg["recipe"], cfg["variant"], cfg["baseline_run_id"] or None) as record:
        try:
            Trainer(cfg, device, record, startup).run()
        except ValueError as err:  # a combination only the model or data can judge: one line, run FAILED
            raise click.ClickException(str(err)) from None


def _settle(opts: dict) -> dict:
    """Fill variant defaults and reject contradictory input with one line, before any run starts."""
    from .pruning import METHODS
    from .quantization import SCHEMES
    from .torch_device import PRECISIONS
    from .torch_models import MODELS

    def checks(cfg: dict) -> list[tuple[bool, str]]:
        return [
            (cfg["variant"] != "compiled" or cfg["compile_mode"] != "none",
             "variant=compiled needs a compile_mode other than none"),
            ((cfg["model_name"] == "dlrm") == (cfg["dataset"] == "clicks") or bool(cfg["data_dir"]),
             "model=dlrm goes with dataset=clicks, and dataset=clicks only with model=dlrm"),
        ]

    choices = {"model_name": MODELS, "precision": PRECISIONS, "prune_method": METHODS, "quant_scheme": SCHEMES}
    return settings.settle(opts, FAMILY, choices, checks)


class Trainer:
    def __init__(self, cfg: dict, device, record, startup=None):
        from .startup import Startup

        self.cfg, self.device, self.record = cfg, device, record
        self.startup = startup or Startup()
        self.recorded = False  # the run's params and start-up split: logged once the first step has run
        self.peak = None

    # --- set-up -------------------------------------------------------------------------

    def run(self) -> None:
        import torch

        from . import torch_data, torch_models
        from .records import EarlyStopping, TrainingLog, say
        from .torch_device import set_matmul_precision, start_device, synchronize

        cfg, device = self.cfg, self.device
        set_matmul_precision(cfg["precision"])
        start_device(device)
        self.startup.mark("device")
        self.data = torch_data.load(
            cfg["dataset"], cfg["batch_size"], device, cfg["train_samples"], cfg["val_samples"],
            cfg["data_dir"], cfg["image_size"], cfg["seed"], cfg["num_tables"], cfg["table_rows"],
        )
        synchronize(device)
        self.startup.mark("data")
        self.model = torch_models.build(cfg["model_name"], self.data.num_classes, self.data.input_shape,
                                        self.data.dlrm_spec, cfg["width"], cfg["embedding_dim"]).to(device)
        if cfg["channels_last"]:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.example = self._example()
        self.fwd_flops = 0.0  # counted once the first step has run (_record_setup)
        if device.type == "cpu":
            say("MFU is n/a on CPU (no meaningful device peak); achieved TFLOP/s is still logged")
        synchronize(device)
        self.startup.mark("model")
        self.log = TrainingLog(self.record, EarlyStopping(cfg["patience"], cfg["min_delta"]))
        self.step_model = self._compiled(self.model)
        self._train(cfg["epochs"])
        self._record_setup()  # no training step (epochs=0): the run still gets its params
        apply_variant = {"pruned": self._prune, "quantized": self._quantize}.get(cfg["variant"])
        self._finish(apply_variant() if apply_variant else self._measure(self.step_model))

    def _record_setup(self) -> float:
        """The run's params and the start-up split, logged once, after the first training step (the
        store client's import and calls are no part of the start-up); returns the seconds it took."""
        if self.recorded:
            return 0.0
        import torch

        from .records import say
        from .torch_device import device_name

        from .torch_models import forward_flops_per_sample

        began = time.time()
        self.recorded = True
        if "first_step" not in self.startup.phases and self.cfg["epochs"]:
            self.startup.mark("first_step")
        say(self.startup.text())
        self.fwd_flops = forward_flops_per_sample(self.model, self.example)  # before the first step's progress
        cfg, device = self.cfg, self.device
        self.record.log_params({
            **settings.run_params(cfg), "dataset": self.data.name, "device": device.type,
            "device_name": device_name(device), "train_set_size": _size(self.data.train),
            "val_set_size": _size(self.data.val),
            "channels_last": cfg["channels_last"],
            "compile_backend": cfg["compile_backend"] if cfg["compile_mode"] != "none" else "",
            "torch_version": torch.__version__,
            **({"num_tables": cfg["num_tables"], "table_rows": cfg["table_rows"], "embedding_dim": cfg["embedding_dim"]}
               if cfg["model_name"] == "dlrm" else {}),
        })
        self.record.log_metrics(self.startup.metrics())
        self.record.set_tags({"startup.split": self.startup.text()})
        return time.time() - began

    def _example(self):
        batch = next(iter(self.data.val))
        *inputs, _ = (t.to(self.device) for t in batch)
        if len(inputs[0]) < self.cfg["batch_size"]:
            reps = -(-self.cfg["batch_size"] // len(inputs[0]))
            inputs = [t.repeat(reps, *([1] * (t.dim() - 1)))[: self.cfg["batch_size"]] for t in inputs]
        return tuple(self._layout(inputs))

    def _layout(self, inputs):
        import torch

        if self.cfg["channels_last"] and inputs[0].dim() == 4:
            inputs = [inputs[0].contiguous(memory_format=torch.channels_last), *inputs[1:]]
        return inputs

    def _compiled(self, model):
        import torch

        if self.cfg["compile_mode"] == "none":
            return model
        mode = self.cfg["compile_mode"]
        if mode == "reduce-overhead" and self.device.type != "cuda":
            mode = "default"
        return torch.compile(model, mode=mode, backend=self.cfg["compile_backend"])

    def _autocast(self):
        from .torch_device import autocast

        return autocast(self.device, self.cfg["precision"])

    # --- training -----------------------------------------------------------------------

    def _train(self, epochs: int, phase: str = "train") -> None:
        import torch

        from radt_ext.workload_api.progress import log_progress
        from radt_ext.workload_api.progress import phase as mark_phase

        from .inference import evaluate
        from .torch_device import grad_scaler, synchronize
        from .torch_optim import AdamW

        cfg, device = self.cfg, self.device
        model = self.step_model
        optimizer = AdamW(self.model.parameters(), lr=cfg["lr"])  # torch's AdamW update, no torch._dynamo import
        scaler = grad_scaler(device, cfg["precision"])
        if not self.recorded:
            self.startup.mark("optimizer")
        cudagraphs = cfg["compile_mode"] == "reduce-overhead" and device.type == "cuda"
        for epoch in range(epochs):
            # Epoch 1 is warm-up (cuDNN autotuning, the allocator, clocks): left outside the marked phase,
            # so the run's active phase (and its throughput, J/sample, slowdown) is the steady epochs'.
            marked = mark_phase(phase) if epoch > 0 else contextlib.nullcontext()
            model.train()
            loss_sum = torch.zeros((), device=device)
            correct = torch.zeros((), device=device, dtype=torch.long)
            seen = 0
            synchronize(device)
            marked.__enter__()
            start = time.time()
            for batch in self.data.train:
                *inputs, target = (t.to(device, non_blocking=True) for t in batch)
                inputs = self._layout(inputs)
                if cudagraphs:
                    torch.compiler.cudagraph_mark_step_begin()
                with self._autocast():
                    logits = model(*inputs)
                if not self.recorded:  # the first forward holds cuDNN/cuBLAS's lazy set-up (and compilation)
                    synchronize(device)
                    self.startup.mark("first_forward")
                loss = torch.nn.functional.cross_entropy(logits.float(), target)
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
                if not self.recorded:
                    synchronize(device)
                    start += self._record_setup()  # the epoch's clock leaves out the recording
                n = target.shape[0]
                loss_sum += loss.detach() * n
                correct += (logits.detach().argmax(1) == target).sum()
                seen += n
                log_progress(samples=n, steps=1, flops=3 * self.fwd_flops * n)
            synchronize(device)
            end = time.time()
            marked.__exit__(None, None, None)
            val_loss, val_acc = evaluate(model, self.data.val, device, self._autocast)
            if self.log.epoch_done(start, end, seen, 3 * self.fwd_flops * seen, {
                "train_loss": loss_sum.item() / max(seen, 1), "train_accuracy": correct.item() / max(seen, 1),
                "val_loss": val_loss, "val_accuracy": val_acc,
            }, may_stop=phase == "train"):
                break

    # --- variants -----------------------------------------------------------------------

    def _measure(self, model, device=None, context=None, dtype=None, prefix: str = "inference") -> dict:
        from .inference import evaluate, latency

        device = device or self.device
        context = context or self._autocast
        example = tuple(t.to(device) for t in self.example)
        if dtype is not None:
            example = tuple(t.to(dtype) if t.is_floating_point() else t for t in example)
        loss, acc = evaluate(model, self.data.val, device, context, dtype)
        out = latency(model, example, device, self.cfg["infer_iters"], context=context, prefix=prefix)
        out.update({"final_val_loss": loss, "final_accuracy": acc})
        return out

    def _prune(self) -> dict:
        import torch

        from . import pruning
        from .records import say
        from .torch_models import param_counts

        cfg, model = self.cfg, self.model
        method = cfg["prune_method"]
        dense_params, _ = param_counts(model)
        self.record.log_metrics({"prune_epoch": self.log.epoch, "dense_param_count": dense_params})
        if method == "unstructured":
            pruning.apply_unstructured(model, cfg["sparsity"])
        elif method == "structured":
            chains = pruning.apply_structured(model, cfg["sparsity"])
            say(f"structured pruning shrank {chains} layer chains by {cfg['sparsity']:.0%} of their channels")
            self.step_model = self._compiled(model)
        else:
            layers = pruning.apply_24_masks(model)
            say(f"2:4 masks on {layers} linear layers")
        self._train(cfg["finetune_epochs"], phase="finetune")
        pruning.make_permanent(model)
        if method != "semi24":
            return self._measure(self.step_model)
        dtype = torch.bfloat16 if cfg["precision"] == "bf16" else torch.float16
        model.to(dtype)
        dense = self._measure(model, context=contextlib.nullcontext, dtype=dtype, prefix="dense_inference")
        decisions = pruning.convert_24(model, self.example[0].shape[0])
        used = [d["layer"] for d in decisions if d["used"]]
        say(f"2:4 sparse weights kept on {len(used)} of {len(decisions)} eligible layers: {', '.join(used) or 'none paid off'}")
        self.record.log_text(json.dumps(decisions, indent=1), "semi24_layers.json")
        self.record.set_tags({"semi24_layers": ",".join(used) or "none"})
        out = self._measure(model, context=contextlib.nullcontext, dtype=dtype)
        out.update({k: v for k, v in dense.items() if k.startswith("dense_inference_")})
        out["semi24_layer_count"] = len(used)
        out["sparse_speedup_ratio"] = out["inference_throughput_samples_per_s"] / dense["dense_inference_throughput_samples_per_s"]
        return out

    def _quantize(self) -> dict:
        import torch

        from . import quantization
        from .records import say

        cfg = self.cfg
        scheme = cfg["quant_scheme"]
        if scheme == "fp8":
            fp32 = self._measure(self.model, prefix="fp32_inference")
            qmodel, swapped = quantization.fp8(self.model)
            say(f"fp8 matmuls on {len(swapped)} linear layers")
            self.record.set_tags({"fp8_layers": ",".join(swapped) or "none"})
            bf16 = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
            out = self._measure(qmodel, context=bf16)
        else:
            cpu = torch.device("cpu")
            float_cpu = self.model.cpu().eval()
            self.example = tuple(t.cpu().contiguous() for t in self.example)
            fp32 = self._measure(float_cpu, device=cpu, context=contextlib.nullcontext, prefix="fp32_inference")
            say(f"{scheme}: quantizing on CPU (fbgemm/x86 int8 kernels); fp32 and int8 are both timed on CPU")
            if scheme == "static_int8":
                qmodel = quantization.static_int8(float_cpu, self.data.calibration, self.example, cfg["calibration_batches"])
            else:
                qmodel = quantization.dynamic_int8(float_cpu)
            out = self._measure(qmodel, device=cpu, context=contextlib.nullcontext)
            out["inference_device_cpu_bool"] = 1.0
        out.update({
            "fp32_accuracy": fp32["final_accuracy"],
            "fp32_inference_throughput_samples_per_s": fp32["fp32_inference_throughput_samples_per_s"],
            "fp32_inference_latency_p50_ms": fp32["fp32_inference_latency_p50_ms"],
            "accuracy_drop_pts": 100.0 * (fp32["final_accuracy"] - out["final_accuracy"]),
            "quantized_speedup_ratio": out["inference_throughput_samples_per_s"] / fp32["fp32_inference_throughput_samples_per_s"],
        })
        self.final_model = qmodel
        return out

    # --- end ------------------------------------------------------------------------------

    def _finish(self, final: dict) -> None:
        from .torch_device import measured_peak_tflops
        from .torch_models import param_counts, size_bytes

        # the matmul peak for MFU, measured after training, not before its first step
        self.peak, source = measured_peak_tflops(self.device, self.cfg["precision"])
        self.record.log_params({"peak_tflops_source": source})
        model = getattr(self, "final_model", self.model)
        total, nonzero = param_counts(self.model)
        self.log.finish({
            **final, "model_size_bytes": size_bytes(model), "param_count": total, "nonzero_param_count": nonzero,
            "forward_flops_per_sample": self.fwd_flops,
        }, self.peak)


def _size(batches) -> int:
    if hasattr(batches, "size"):
        return int(batches.size)
    return len(batches.dataset)


if __name__ == "__main__":
    main()
