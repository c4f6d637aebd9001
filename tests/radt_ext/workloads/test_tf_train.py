"""tf_train, tf_data, tf_models and tf_quantization on CPU with tiny settings.

Bad input is checked in child processes that never load TensorFlow (the checks come first);
the rest runs in this process so TensorFlow loads once.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest

import radt_ext.workloads.tf_train  # noqa: F401  sets TF_USE_LEGACY_KERAS before TensorFlow loads

HAS_TF = importlib.util.find_spec("tensorflow") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="TensorFlow is not installed; pip install 'radt-ext[tensorflow]'")
# Runs tf_train's entry point as `python -m` would, then says whether TensorFlow was loaded.
PROBE = """
import sys, click
from radt_ext.workloads import tf_train
try:
    tf_train.main(sys.argv[1:], standalone_mode=False)
except click.ClickException as exc:
    exc.show()
    print("tensorflow loaded:", sys.modules.get("tensorflow") is not None, file=sys.stderr)
    sys.exit(exc.exit_code)
"""
TINY = ["--epochs", "1", "--train-samples", "64", "--val-samples", "32", "--batch-size", "32",
        "--width", "4", "--infer-iters", "3"]


@needs_tf
@pytest.mark.parametrize("args,needle", [
    (["--variant", "mixed", "--precision", "fp32"], "variant=mixed trains in bf16 or fp16"),
    (["--variant", "xla", "--compile-mode", "none"], "variant=xla compiles with XLA"),
    (["--variant", "pruned", "--finetune-epochs", "0"], "set finetune_epochs to 1 or more"),
    (["--quant-scheme", "int4"], "unknown quant_scheme 'int4'"),
    (["--model", "vgg99"], "unknown model 'vgg99'"),
    (["--data", "/no/such/folder"], "is not a folder"),
])
@pytest.mark.new_store
def test_bad_input_gets_one_line_before_tensorflow_loads_or_a_run_starts(tracking_uri, args, needle):
    done = subprocess.run([sys.executable, "-c", PROBE, *TINY, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and needle in errors[0], done.stderr
    assert "Traceback" not in done.stderr and "tensorflow loaded: False" in done.stderr
    assert not Path(tracking_uri.removeprefix("sqlite:///")).exists()  # no run, the store never opened


def test_without_tensorflow_the_entry_point_says_how_to_install_it(tracking_uri):
    hide = "import sys; sys.modules['tensorflow'] = None\n"  # as if it were not installed
    done = subprocess.run([sys.executable, "-c", hide + PROBE, *TINY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Error: TensorFlow is not installed; install the extra with pip install 'radt-ext[tensorflow]'" in done.stderr


@pytest.mark.new_store
@needs_tf
def test_pruning_under_keras_3_refuses_in_one_line_before_a_run(tracking_uri, monkeypatch):
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "0")  # the user chose Keras 3; TF Model Optimization cannot use it
    done = subprocess.run([sys.executable, "-c", PROBE, *TINY, "--variant", "pruned"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == ["Error: variant=pruned needs tf-keras, but TensorFlow is using Keras 3 here; "
                      "leave TF_USE_LEGACY_KERAS unset or set it to 1"], done.stderr
    assert not Path(tracking_uri.removeprefix("sqlite:///")).exists()


@needs_tf
def test_synthetic_and_digits_sets_are_fixed_by_seed_and_scaled_like_the_torch_family():
    from radt_ext.workloads import tf_data

    a = tf_data.load("synthetic32", 16, train_samples=40, val_samples=8, seed=3)
    b = tf_data.load("synthetic32", 16, train_samples=40, val_samples=8, seed=3)
    first = lambda d: next(d.val.as_numpy_iterator())  # noqa: E731
    assert np.array_equal(first(a)[0], first(b)[0])
    assert (a.input_shape, a.train_size, a.val_size, a.num_classes) == ((32, 32, 3), 40, 8, 10)
    assert [len(y) for _, y in a.train.as_numpy_iterator()] == [16, 16]  # ragged last batch dropped
    digits = tf_data.load("digits", 64, seed=0)
    images, labels = first(digits)
    assert (digits.train_size, digits.val_size, digits.input_shape) == (1437, 360, (32, 32, 3))
    assert -1.0 <= images.min() < 0 < images.max() <= 1.0 and set(labels) <= set(range(10))


@needs_tf
def test_an_image_folder_is_split_80_20_with_one_class_per_sub_folder(tmp_path):
    import tensorflow as tf

    from radt_ext.workloads import tf_data

    for c, name in enumerate(("cat", "dog")):
        (tmp_path / name).mkdir()
        for i in range(5):
            pixels = np.full((12, 12, 3), 40 + 150 * c, dtype=np.uint8)
            tf.io.write_file(str(tmp_path / name / f"{i}.png"), tf.io.encode_png(pixels))
    data = tf_data.load("ignored", 4, data_dir=str(tmp_path), image_size=16, seed=0)
    assert (data.name, data.num_classes, data.train_size, data.val_size) == ("folder", 2, 8, 2)
    images, _ = next(data.val.as_numpy_iterator())
    assert images.shape[1:] == (16, 16, 3) and -1.0 <= images.min() and images.max() <= 1.0


@needs_tf
def test_small_cnn_flops_match_the_layer_arithmetic_and_counts_see_zeros():
    from radt_ext.workloads import tf_models

    model = tf_models.build("small_cnn", 10, (32, 32, 3), width=4)
    # conv 3->4 @32², conv 4->8 @32², pool, conv 8->16 @16², pool, dense 16*8*8 -> 10
    expected = 2 * (32 * 32 * 27 * 4 + 32 * 32 * 36 * 8 + 16 * 16 * 72 * 16 + 1024 * 10)
    assert tf_models.forward_flops_per_sample(model) == expected
    total, nonzero = tf_models.param_counts(model)
    logits = model.get_layer("logits")
    logits.kernel.assign(np.zeros(logits.kernel.shape, np.float32))
    assert tf_models.param_counts(model) == (total, nonzero - 1024 * 10)
    with pytest.raises(ValueError, match="at least 32x32"):
        tf_models.build("mobilenet_v2", 10, (8, 8, 3))


@needs_tf
def test_tflite_fp32_runner_agrees_with_keras_for_any_batch_size():
    import tensorflow as tf

    from radt_ext.workloads import tf_data, tf_models, tf_quantization

    data = tf_data.load("synthetic32", 8, train_samples=16, val_samples=12, seed=1)
    model = tf_models.build("small_cnn", 10, data.input_shape, width=2)
    runner = tf_quantization.Runner(tf_quantization.convert(model, None))
    for images, _ in data.val.as_numpy_iterator():  # batches of 8 then 4: the runner resizes
        np.testing.assert_allclose(runner(images), model(tf.constant(images), training=False).numpy(), atol=1e-4)
    loss, acc = tf_quantization.evaluate(runner, data.val)
    model.compile(loss=tf_models.keras().losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    keras_loss, keras_acc = model.evaluate(data.val, verbose=0)
    assert loss == pytest.approx(keras_loss, rel=1e-3) and acc == pytest.approx(keras_acc)


@needs_tf
def test_early_stopping_stops_and_says_so(tracking_uri, capsys):
    from radt_ext.workloads import tf_train

    # lr so large that val loss cannot keep improving: patience 1 stops well before 6 epochs.
    tf_train.main([*TINY, "--epochs", "6", "--patience", "1", "--lr", "5"], standalone_mode=False)
    run = mlflow.search_runs(experiment_ids=["0"], output_format="list")[0]
    assert run.info.status == "FINISHED" and run.data.tags["recipe"] == "tf_baseline"
    assert run.data.metrics["epochs_run"] < 6 and "stopped_epoch" in run.data.metrics
    assert run.data.tags["early_stopped"] == "true"
    assert "early stopping after epoch" in capsys.readouterr().err
