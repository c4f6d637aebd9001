"""The TensorFlow training entry point every tf_* recipe calls:

    python -m radt_ext.workloads.tf_train --recipe tf_xla --variant xla --model small_cnn ...

The TensorFlow counterpart of `torch_train`, with the same options, params, tags and metrics
(see `settings` and `records`): it trains a Keras model fed by `tf.data` under the session's listeners (it
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

from . import settings

if importlib.util.find_spec("tf_keras") is not None:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

VARIANTS = ("baseline", "xla", "mixed", "pruned", "quantized")
COMPILE_MODES = ("none", "xla")
FAMILY = settings.Family("tf", half_variant="mixed", compile_variant="xla", compile_mode="xla")


@click.command(context_settings={"show_default": True})
@click.option("--recipe", default="", help="recipe name for the `recipe` tag (default tf_<variant>)")
@click.option("--variant", type=click.Choice(VARIANTS), default="baseline")
@click.option("--model", "model_name", default="small_cnn", help="small_cnn, mobilenet_v2, resnet50 or mlp")
@click.option("--dataset", default="synthetic32", help="synthetic32, synthetic224, digits or digits8")
@click.option("--train-samples", type=click.IntRange(1), default=2048, help="synthetic training set size")
@click.option("--precision", default="", help="fp32, bf16 (mixed_bfloat16) or fp16 (mixed_float16)")
@click.option("--compile-mode", default="", help="none or xla (Keras jit_compile)")
@click.option("--prune-method", default="unstructured", help="unstructured or semi24 (2:4 masks)")
@click.option("--quant-scheme", default="static_int8", help="static_int8, dynamic_int8 or float16 (TFLite)")
@click.option("--device", "device_req", type=click.Choice(("auto", "cpu", "gpu")), default="auto")
@settings.shared_options
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
    with RunRecord(cfg["recipe"], cfg["variant"], cfg["baseline_run_id"] or None) as record:
        try:
            Trainer(cfg, device, device_name, record).run()
        finally:
            reset_precision()  # global Keras state: leave none behind for a caller in the same process
            _keras().backend.clear_session()


def settle(opts: dict) -> dict:
    """Fill variant defaults and reject contradictory input with one line, before TensorFlow loads."""
    from .tf_device import PRECISIONS
    from .tf_models import MODELS
    from .tf_pruning import METHODS, missing
    from .tf_quantization import SCHEMES

    def checks(cfg: dict) -> list[tuple[bool, str]]:
        v = cfg["variant"]
        return [
            (importlib.util.find_spec("tensorflow") is not None,
             "TensorFlow is not installed; install the extra with pip install 'radt-ext[tensorflow]'"),
            (cfg["compile_mode"] in COMPILE_MODES, f"unknown compile_mode {cfg['compile_mode']!r}; choose none or xla"),
            (v != "xla" or cfg["compile_mode"] == "xla", "variant=xla compiles with XLA; set compile_mode=xla"),
            (v != "pruned" or cfg["finetune_epochs"] >= 1,
             "variant=pruned prunes while it fine-tunes (prune_low_magnitude); set finetune_epochs to 1 or more"),
            (v != "pruned" or missing() is None, missing() or ""),
        ]

    choices = {"model_name": MODELS, "precision": PRECISIONS, "prune_method": METHODS, "quant_scheme": SCHEMES}
    return settings.settle(opts, FAMILY, choices, checks)


def progress_callback(samples_per_step: int, flops_per_sample: float):
    """Keras callback: `log_progress` every step (samples, steps, FLOPs) for the session.
    Built here because the Callback base class exists only once TensorFlow has loaded."""
    from radt_ext.workload_api.progress import log_progress

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
        from .records import EarlyStopping, TrainingLog, say
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
        self.record.log_params({
            **settings.run_params(cfg), "dataset": self.data.name, "device": self.device, "device_name": self.device_name,
            "train_set_size": self.data.train_size, "val_set_size": self.data.val_size,
            "peak_tflops_source": peak_source, "mixed_precision_policy": policy, "channels_last": True,
            "framework": "tensorflow", "tensorflow_version": tf.__version__, "keras_version": _keras_version(),
        })
        self.log = TrainingLog(self.record, EarlyStopping(cfg["patience"], cfg["min_delta"]))
        self.example = self._example()
        self._compile(self.model)
        self._train(self.model, cfg["epochs"])
        apply_variant = {"pruned": self._prune, "quantized": self._quantize}.get(cfg["variant"])
        self._finish(apply_variant() if apply_variant else self._measure(self.model))

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
        per_step = min(self.cfg["batch_size"], self.data.train_size)
        progress = progress_callback(per_step, self.fwd_flops)
        for _ in range(epochs):
            start = time.time()
            history = model.fit(self.data.train, epochs=1, verbose=0, callbacks=[progress, *callbacks])
            end = time.time()
            steps = self._steps_per_epoch()
            seen = steps * per_step
            val = model.evaluate(self.data.val, verbose=0, return_dict=True)
            if self.log.epoch_done(start, end, seen, 3 * self.fwd_flops * seen, {
                "train_loss": history.history["loss"][-1], "train_accuracy": history.history["accuracy"][-1],
                "val_loss": val["loss"], "val_accuracy": val["accuracy"],
            }, may_stop=phase == "train"):
                break

    def _steps_per_epoch(self) -> int:
        size, batch = self.data.train_size, self.cfg["batch_size"]
        return max(1, size // batch) if size >= batch else 1

    # --- variants -----------------------------------------------------------------------

    def _measure(self, model, prefix: str = "inference") -> dict:
        import tensorflow as tf

        from radt_ext.workload_api.progress import log_progress

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
        self.record.log_metrics({"prune_epoch": self.log.epoch, "dense_param_count": dense_params,
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
        from .tf_models import param_counts, size_bytes

        total, nonzero = param_counts(self.model)
        self.log.finish({
            **final, "model_size_bytes": getattr(self, "final_size", None) or size_bytes(self.model),
            "param_count": total, "nonzero_param_count": nonzero, "forward_flops_per_sample": self.fwd_flops,
        }, self.peak)


def _keras_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    legacy = os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    try:
        return ("tf-keras " if legacy else "keras ") + version("tf-keras" if legacy else "keras")
    except PackageNotFoundError:
        return ""


if __name__ == "__main__":
    main()
