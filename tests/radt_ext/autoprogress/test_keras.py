"""Keras counted from inside an unmodified script: fit's epochs, steps and samples, its validation,
evaluate and predict (one interpreter: TensorFlow takes long to import)."""
import pytest


@pytest.mark.slow
def test_fit_evaluate_and_predict_count_exactly(run_script):
    ran = run_script("""
        import numpy as np, keras, tensorflow as tf
        x = np.random.rand(100, 4).astype("float32")
        y = np.random.rand(100, 1).astype("float32")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        history = keras.callbacks.History()
        model.fit(x, y, batch_size=32, epochs=3, verbose=0, validation_data=(x[:30], y[:30]), callbacks=[history])
        model.fit(x, y, epochs=1, verbose=0, validation_split=0.2)  # 80 in batches of 32 (the default)
        model.evaluate(x, y, batch_size=16, verbose=0)
        model.predict(x[:50], verbose=0)
        model.predict(tf.data.Dataset.from_tensor_slices(x[:20]).batch(10), verbose=0)
        print(len(history.history["loss"]))
    """, timeout=240)
    assert ran.returncode == 0 and ran.stdout.strip() == "3", ran.stderr
    assert ran.last("keras") == {
        "steps": 15, "train_batches": 15, "train_samples": 380,  # 3 x (32, 32, 32, 4) + (32, 32, 16)
        "eval_batches": 15, "eval_samples": 260,  # validation 3 x 30 + 20; evaluate 100 in 7; predict 50 in 2
        "unsized_batches": 2,  # the dataset's 2 batches of unknown size
        "epochs": 4}
    assert ran.epoch_marks("keras") == [(n, e) for n in (1, 2, 3, 4) for e in ("start", "end")]
    ran.assert_epoch_totals("keras", [100] * 3 + [80])
    assert sum(1 for r in ran.of("keras") if r.get("hooked")) == 1


@pytest.mark.slow
def test_a_failing_callback_leaves_fit_as_it_was(run_script):
    ran = run_script("""
        import numpy as np, keras
        x, y = np.ones((40, 2), "float32"), np.ones((40, 1), "float32")
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        print(len(model.fit(x, y, batch_size=10, epochs=2, verbose=0).history["loss"]))
    """, env={"RADT_EXT_PROGRESS_FAULT": "keras-callback"}, timeout=240)
    assert ran.returncode == 0 and ran.stdout.strip() == "2", ran.stderr
    assert [line for line in ran.stderr.splitlines() if line.startswith("radt-ext:")] == [
        "radt-ext: progress hook keras-callback failed and was removed "
        "(RuntimeError: fault injected by RADT_EXT_PROGRESS_FAULT)"]
    assert not ran.totals("keras") and len([r for r in ran.of("keras") if "error" in r]) == 1
