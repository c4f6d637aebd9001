"""The TensorFlow training entry point every tf_* recipe calls:

    python -m radt_ext.workloads.tf_train --recipe tf_xla --variant xla --model small_cnn ...

The TensorFlow counterpart of `torch_train`, with the same options, params, tags and metrics
(see `records`): it trains a Keras model fed by `tf.data` under the session's listeners (it
never samples hardware itself), reports progress with `radt_ext.log_progress` every step,
and records into the MLflow run it was handed.

Keras: TF Model Optimization (variant=pruned) works on Keras 2 only, so the whole family runs
on tf-keras when it is installed (TF_USE_LEGACY_KERAS=1, set here before TensorFlow loads);
one Keras for every variant keeps the comparison fair.
"""
from __future__ import annotations

import importlib.util
import os
import random
import time

import click

if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = ("baseline", "xla", "mixed", "pruned", "quantized")
COMPILE_MODES = ("none", "xla")


@click.command(context_settings={"show_default": True})
@click.option("--recipe", default="", help="recipe name for the `recipe` tag (default tf_<variant>)")
@click.option("--variant", type=click.Choice(VARIANTS), default="baseline")
@click.option("--model", "model_name", default="small_cnn", help="small_cnn, mobilenet_v2, resnet50 or mlp")
@click.option("--dataset", default="synthetic32", help="synthetic32, synthetic224, digits or digits8")
@click.option("--data", "data_dir", default="", help="an image folder (one sub-folder per class); overrides --dataset")
@click.option("--image-size", type=int, default=224, help="image side for --data folders")
@click.option("--batch-size", type=click.IntRange(1), default=64)
@click.option("--epochs", type=click.IntRange(0), default=2)
@click.option("--lr", type=float, default=1e-3)
@click.option("--seed", type=int, default=0)
@click.option("--train-samples", type=click.IntRange(1), default=2048, help="synthetic training set size")
@click.option("--val-samples", type=click.IntRange(1), default=512)
@click.option("--precision", default="", help="fp32, bf16 (mixed_bfloat16) or fp16 (mixed_float16)")
@click.option("--compile-mode", default="", help="none or xla (Keras jit_compile)")
@click.option("--prune-method", default="unstructured", help="unstructured or semi24 (2:4 masks)")
@click.option("--sparsity", type=click.FloatRange(0, 1, max_open=True), default=0.5)
@click.option("--finetune-epochs", type=click.IntRange(0), default=1)
@click.option("--quant-scheme", default="static_int8", help="static_int8, dynamic_int8 or float16 (TFLite)")
@click.option("--calibration-batches", type=click.IntRange(1), default=16)
@click.option("--patience", type=click.IntRange(0), default=0, help="early stopping on val loss (0: off)")
@click.option("--min-delta", type=float, default=0.0)
@click.option("--device", "device_req", type=click.Choice(("auto", "cpu", "gpu")), default="auto")
@click.option("--infer-iters", type=click.IntRange(1), default=30)
@click.option("--baseline-run-id", default="", help="run to compare with (tag baseline_run_id)")
@click.option("--width", type=click.IntRange(1), default=32, help="small_cnn channels / mlp hidden units / 32")
def main(**opts) -> None:
    cfg = settle(opts)
    from .records import RunRecord
    from .tf_device import DeviceError, pick_device, reset_precision
    from .tf_models import keras as _keras

    try:
        device, device_name = pick_device(cfg["device_req"])
    except DeviceError as exc:
        raise click.ClickException(str(exc)) from None
    if cfg["variant"] == "pruned":
        from .tf_pruning import keras_problem

        if keras_problem():
            raise click.ClickException(keras_problem())
    random.seed(cfg["seed"])
    record = RunRecord(cfg["recipe"], cfg["variant"], cfg["baseline_run_id"] or None)
    failed = True
    try:
        Trainer(cfg, device, device_name, record).run()
        failed = False
    finally:
        reset_precision()  # global Keras state: leave none behind for a caller in the same process
        _keras().backend.clear_session()
        record.finish(failed=failed)


def settle(opts: dict) -> dict:
    """Fill variant defaults and reject contradictory input with one line, before TensorFlow loads."""
    from .tf_device import PRECISIONS
    from .tf_models import MODELS
    from .tf_pruning import METHODS, missing
    from .tf_quantization import SCHEMES

    cfg = dict(opts)
    v = cfg["variant"]
    cfg["recipe"] = cfg["recipe"] or f"tf_{v}"
    cfg["precision"] = cfg["precision"] or ("bf16" if v == "mixed" else "fp32")
    cfg["compile_mode"] = cfg["compile_mode"] or ("xla" if v == "xla" else "none")
    checks = [
        (importlib.util.find_spec("tensorflow") is not None,
         "TensorFlow is not installed; install the extra with pip install 'radt-ext[tensorflow]'"),
        (cfg["model_name"] in MODELS, f"unknown model {cfg['model_name']!r}; choose one of {', '.join(MODELS)}"),
        (cfg["precision"] in PRECISIONS, f"unknown precision {cfg['precision']!r}; choose one of {', '.join(PRECISIONS)}"),
        (cfg["compile_mode"] in COMPILE_MODES, f"unknown compile_mode {cfg['compile_mode']!r}; choose none or xla"),
        (v != "mixed" or cfg["precision"] in ("bf16", "fp16"), "variant=mixed trains in bf16 or fp16; set precision=bf16 or fp16"),
        (v != "xla" or cfg["compile_mode"] == "xla", "variant=xla compiles with XLA; set compile_mode=xla"),
        (cfg["prune_method"] in METHODS, f"unknown prune_method {cfg['prune_method']!r}; choose one of {', '.join(METHODS)}"),
        (v != "pruned" or cfg["finetune_epochs"] >= 1,
         "variant=pruned prunes while it fine-tunes (prune_low_magnitude); set finetune_epochs to 1 or more"),
        (v != "pruned" or missing() is None, missing() or ""),
        (cfg["quant_scheme"] in SCHEMES, f"unknown quant_scheme {cfg['quant_scheme']!r}; choose one of {', '.join(SCHEMES)}"),
        (not cfg["data_dir"] or os.path.isdir(cfg["data_dir"]),
         f"data={cfg['data_dir']!r} is not a folder; pass a folder with one sub-folder of images per class"),
    ]
    for ok, message in checks:
        if not ok:
            raise click.ClickException(message)
    return cfg


def progress_callback(samples_per_step: int, flops_per_sample: float):
    """Keras callback: `log_progress` every step (samples, steps, FLOPs) for the session.
    Built here because the Callback base class exists only once TensorFlow has loaded."""
    from radt_ext.progress import log_progress

    from .tf_models import keras

    class Progress(keras().callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            log_progress(samples=samples_per_step, steps=1, flops=3 * flops_per_sample * samples_per_step)

    return Progress()


class Trainer:
    def __init__(self, cfg: dict, device: str, device_name: str, record):
        self.cfg, self.device, self.device_name, self.record = cfg, device, device_name, record

    def run(self) -> None:
        import tensorflow as tf

        from . import tf_data, tf_models
        from .records import EarlyStopping, say
        from .tf_device import measured_peak_tflops, set_precision

        cfg = self.cfg
        tf.keras.utils.set_random_seed(cfg["seed"])
        policy = set_precision(cfg["precision"])
        if cfg["precision"] == "fp16" and self.device == "cpu":
            say("mixed_float16 on CPU runs many kernels in emulation; bf16 is the CPU choice")
        try:
            self.data = tf_data.load(cfg["dataset"], cfg["batch_size"], cfg["train_samples"], cfg["val_samples"],
                                     cfg["data_dir"], cfg["image_size"], cfg["seed"])
            self.model = tf_models.build(cfg["model_name"], self.data.num_classes, self.data.input_shape, cfg["width"])
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        self.fwd_flops = tf_models.forward_flops_per_sample(self.model)
        self.peak, peak_source = measured_peak_tflops(self.device, cfg["precision"])
        if self.device == "cpu":
            say("MFU is n/a on CPU (no meaningful device peak); achieved TFLOP/s is still logged")
        v = cfg["variant"]
        self.record.log_params({
            "model": cfg["model_name"], "dataset": self.data.name, "data": cfg["data_dir"],
            "batch_size": cfg["batch_size"], "epochs": cfg["epochs"], "lr": cfg["lr"], "seed": cfg["seed"],
            "precision": cfg["precision"], "mixed_precision_policy": policy, "channels_last": True,
            "compile_mode": cfg["compile_mode"],
            "sparsity": cfg["sparsity"] if v == "pruned" else 0.0,
            "prune_method": cfg["prune_method"] if v == "pruned" else "none",
            "finetune_epochs": cfg["finetune_epochs"] if v == "pruned" else 0,
            "quant_scheme": cfg["quant_scheme"] if v == "quantized" else "none",
            "patience": cfg["patience"], "device": self.device, "device_name": self.device_name,
            "train_set_size": self.data.train_size, "val_set_size": self.data.val_size,
            "peak_tflops_source": peak_source, "framework": "tensorflow",
            "tensorflow_version": tf.__version__, "keras_version": _keras_version(),
        })
        self.stopper = EarlyStopping(cfg["patience"], cfg["min_delta"])
        self.epoch, self.train_seconds, self.train_flops = 0, 0.0, 0.0
        self.example = self._example()
        self._compile(self.model)
        self._train(self.model, cfg["epochs"])
        final = self._variant()
        self._finish(final)

    def _example(self):
        """One full inference batch from the validation set (repeated when the set is smaller)."""
        import numpy as np

        chunks, have = [], 0
        for images, _ in self.data.val.as_numpy_iterator():
            chunks.append(images)
            have += len(images)
            if have >= self.cfg["batch_size"]:
                break
        images = np.concatenate(chunks)
        reps = -(-self.cfg["batch_size"] // len(images))
        return np.concatenate([images] * reps)[: self.cfg["batch_size"]].astype(np.float32)

    def _compile(self, model) -> None:
        from .tf_models import keras

        k = keras()
        model.compile(
            optimizer=k.optimizers.AdamW(learning_rate=self.cfg["lr"]),
            loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            jit_compile=self.cfg["compile_mode"] == "xla",
        )

    # --- training -----------------------------------------------------------------------

    def _train(self, model, epochs: int, phase: str = "train", callbacks=()) -> None:
        from .records import say

        per_step = min(self.cfg["batch_size"], self.data.train_size)
        progress = progress_callback(per_step, self.fwd_flops)
        for _ in range(epochs):
            start = time.time()
            history = model.fit(self.data.train, epochs=1, verbose=0, callbacks=[progress, *callbacks])
            end = time.time()
            steps = self._steps_per_epoch()
            seen = steps * per_step
            self.train_seconds += end - start
            self.train_flops += 3 * self.fwd_flops * seen
            val = model.evaluate(self.data.val, verbose=0, return_dict=True)
            self.record.log_epoch(self.epoch, start, end, seen, {
                "train_loss": history.history["loss"][-1], "train_accuracy": history.history["accuracy"][-1],
                "val_loss": val["loss"], "val_accuracy": val["accuracy"],
            })
            self.epoch += 1
            if phase == "train" and self.stopper.update(self.epoch - 1, val["loss"]):
                say(f"early stopping after epoch {self.epoch - 1}: val_loss has not improved for {self.cfg['patience']} epochs")
                self.record.set_tags({"early_stopped": "true"})
                self.record.log_metrics({"stopped_epoch": self.epoch - 1})
                break

    def _steps_per_epoch(self) -> int:
        size, batch = self.data.train_size, self.cfg["batch_size"]
        return max(1, size // batch) if size >= batch else 1

    # --- variants -----------------------------------------------------------------------

    def _variant(self) -> dict:
        v = self.cfg["variant"]
        if v == "pruned":
            return self._prune()
        if v == "quantized":
            return self._quantize()
        return self._measure(self.model)

    def _measure(self, model, prefix: str = "inference") -> dict:
        import tensorflow as tf

        from radt_ext.progress import log_progress

        from .records import latency_summary

        val = model.evaluate(self.data.val, verbose=0, return_dict=True)
        infer = tf.function(lambda x: model(x, training=False), jit_compile=self.cfg["compile_mode"] == "xla")
        example = tf.constant(self.example)
        for _ in range(5):
            infer(example).numpy()
        times = []
        start_wall = time.time()
        for _ in range(self.cfg["infer_iters"]):
            t0 = time.perf_counter()
            infer(example).numpy()  # .numpy() waits for the device
            times.append(time.perf_counter() - t0)
            log_progress(inference_samples=len(self.example))
        out = latency_summary(times, len(self.example), prefix)
        out.update({f"{prefix}_start_time_s": start_wall, f"{prefix}_end_time_s": time.time(),
                    "final_val_loss": val["loss"], "final_accuracy": val["accuracy"]})
        return out

    def _prune(self) -> dict:
        from . import tf_models, tf_pruning
        from .records import say

        cfg = self.cfg
        dense_params, _ = tf_models.param_counts(self.model)
        self.record.log_metrics({"prune_epoch": self.epoch, "dense_param_count": dense_params,
                                 "dense_model_gzip_size_bytes": tf_models.gzip_size_bytes(self.model)})
        steps = self._steps_per_epoch() * cfg["finetune_epochs"]
        wrapped, layers, callbacks = tf_pruning.wrap(self.model, cfg["prune_method"], cfg["sparsity"], steps)
        say(f"prune_low_magnitude ({cfg['prune_method']}) on {len(layers)} layers: {', '.join(layers)}")
        self.record.set_tags({"pruned_layers": ",".join(layers) or "none"})
        self._compile(wrapped)
        self._train(wrapped, cfg["finetune_epochs"], phase="finetune", callbacks=callbacks)
        self.model = tf_pruning.strip(wrapped)
        self._compile(self.model)
        out = self._measure(self.model)
        out["model_gzip_size_bytes"] = tf_models.gzip_size_bytes(self.model)
        return out

    def _quantize(self) -> dict:
        from . import tf_quantization as tq
        from .records import say

        cfg, scheme = self.cfg, self.cfg["quant_scheme"]
        say(f"{scheme}: TFLite post-training quantization; fp32 and {scheme} are both timed in the TFLite interpreter on CPU")
        fp32_bytes = tq.convert(self.model, None)
        fp32 = tq.Runner(fp32_bytes)
        fp32_loss, fp32_acc = tq.evaluate(fp32, self.data.val)
        fp32_lat = tq.latency(fp32, self.example, cfg["infer_iters"], prefix="fp32_inference")
        flatbuffer = tq.convert(self.model, scheme, self.data.calibration, cfg["calibration_batches"])
        runner = tq.Runner(flatbuffer)
        loss, acc = tq.evaluate(runner, self.data.val)
        out = tq.latency(runner, self.example, cfg["infer_iters"])
        self.final_size = len(flatbuffer)
        out.update({
            "final_val_loss": loss, "final_accuracy": acc, "inference_device_cpu_bool": 1.0,
            "fp32_accuracy": fp32_acc, "fp32_val_loss": fp32_loss, "fp32_model_size_bytes": len(fp32_bytes),
            "fp32_inference_throughput_samples_per_s": fp32_lat["fp32_inference_throughput_samples_per_s"],
            "fp32_inference_latency_p50_ms": fp32_lat["fp32_inference_latency_p50_ms"],
            "accuracy_drop_pts": 100.0 * (fp32_acc - acc),
            "quantized_speedup_ratio": out["inference_throughput_samples_per_s"] / fp32_lat["fp32_inference_throughput_samples_per_s"],
        })
        return out

    # --- end ------------------------------------------------------------------------------

    def _finish(self, final: dict) -> None:
        from .records import utilisation
        from .tf_models import param_counts, size_bytes

        total, nonzero = param_counts(self.model)
        metrics = dict(final)
        metrics.update({
            "model_size_bytes": getattr(self, "final_size", None) or size_bytes(self.model),
            "param_count": total, "nonzero_param_count": nonzero,
            "train_time_s": self.train_seconds, "epochs_run": self.epoch,
            "forward_flops_per_sample": self.fwd_flops,
        })
        if self.stopper.best_epoch >= 0:
            metrics["best_val_loss"] = self.stopper.best
            metrics["best_epoch"] = self.stopper.best_epoch
        metrics.update(utilisation(self.train_flops, self.train_seconds, self.peak))
        self.record.log_metrics(metrics, step=self.epoch)


def _keras_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    try:
        return ("tf-keras " if legacy else "keras ") + version("tf-keras" if legacy else "keras")
    except PackageNotFoundError:
        return ""


if __name__ == "__main__":
    main()
