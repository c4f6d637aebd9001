"""Datasets for the TensorFlow workloads, served as `tf.data` pipelines. Nothing downloads.

Same sets as the torch family (`torch_data`), built the same way but with NumPy so the
TensorFlow extra needs no torch: synthetic class-template images at 32x32 / 224x224, scikit-
learn's digits resized to 32x32 (or 8x8), and a user image folder. Images are NHWC in [-1, 1].
The NumPy generator differs from torch's, so the synthetic pixels are not bit-identical to
the torch family's; shapes, class structure, split sizes and normalisation are.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

DATASETS = ("synthetic32", "synthetic224", "digits", "digits8")


@dataclass
class Data:
    name: str
    train: object  # tf.data.Dataset of (images, labels) batches, shuffled per epoch
    val: object  # tf.data.Dataset, in order, last batch may be short
    num_classes: int
    input_shape: tuple[int, ...]  # one sample, NHWC: (32, 32, 3)
    train_size: int
    val_size: int
    calibration: object = None  # un-shuffled training batches for TFLite's representative dataset


def synthetic_images(n: int, size: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Class templates plus noise: learnable, so accuracy means something, and fixed by seed."""
    rng = np.random.default_rng(seed)
    templates = rng.standard_normal((classes, size, size, 3), dtype=np.float32)
    labels = rng.integers(0, classes, n).astype(np.int64)
    images = templates[labels] * 0.5 + rng.standard_normal((n, size, size, 3), dtype=np.float32)
    return images, labels


def digits(size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import tensorflow as tf
    from sklearn.datasets import load_digits

    found = load_digits()
    images = (found.images.astype(np.float32) / 16.0)[..., None]
    if size != 8:
        images = tf.image.resize(images, (size, size), method="bilinear").numpy()
    images = np.repeat((images - 0.5) / 0.5, 3, axis=-1)
    order = np.random.default_rng(seed).permutation(len(found.target))
    return images[order], found.target.astype(np.int64)[order]


def load(dataset: str, batch_size: int, train_samples: int = 2048, val_samples: int = 512,
         data_dir: str = "", image_size: int = 224, seed: int = 0) -> Data:
    if data_dir:
        return folder(data_dir, batch_size, image_size, seed)
    if dataset in ("synthetic32", "synthetic224"):
        size = 32 if dataset == "synthetic32" else 224
        images, labels = synthetic_images(train_samples + val_samples, size, 10, seed)
        return _split(dataset, images, labels, train_samples, batch_size, seed)
    if dataset in ("digits", "digits8"):
        images, labels = digits(32 if dataset == "digits" else 8, seed)
        return _split(dataset, images, labels, int(len(labels) * 0.8), batch_size, seed)
    raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)} or pass data=<image folder>")


def _split(name: str, images: np.ndarray, labels: np.ndarray, cut: int, batch_size: int, seed: int) -> Data:
    import tensorflow as tf

    train = tf.data.Dataset.from_tensor_slices((images[:cut], labels[:cut]))
    val = tf.data.Dataset.from_tensor_slices((images[cut:], labels[cut:]))
    return Data(
        name=name,
        # Training drops the ragged last batch so every step has one shape (one XLA compile).
        train=train.cache().shuffle(cut, seed=seed, reshuffle_each_iteration=True)
                   .batch(batch_size, drop_remainder=cut >= batch_size).prefetch(tf.data.AUTOTUNE),
        val=val.cache().batch(batch_size).prefetch(tf.data.AUTOTUNE),
        num_classes=10,
        input_shape=tuple(images.shape[1:]),
        train_size=cut,
        val_size=len(labels) - cut,
        calibration=train.batch(batch_size),
    )


def folder(path: str, batch_size: int, image_size: int, seed: int) -> Data:
    """A user's image folder (one sub-folder per class), split 80/20 with a fixed seed."""
    import tensorflow as tf

    if not os.path.isdir(path):
        raise ValueError(f"data={path!r} is not a folder; pass a folder with one sub-folder of images per class")
    train, val = tf.keras.utils.image_dataset_from_directory(
        path, validation_split=0.2, subset="both", seed=seed, image_size=(image_size, image_size),
        batch_size=None, label_mode="int",
    )
    classes = len(train.class_names)
    scale = lambda x, y: (x / 127.5 - 1.0, y)  # noqa: E731  [0, 255] -> [-1, 1], as the torch family
    train_size, val_size = int(train.cardinality()), int(val.cardinality())
    train, val = train.map(scale), val.map(scale)
    return Data(
        name="folder",
        train=train.cache().shuffle(max(train_size, 1), seed=seed).batch(batch_size, drop_remainder=train_size >= batch_size)
                   .prefetch(tf.data.AUTOTUNE),
        val=val.cache().batch(batch_size).prefetch(tf.data.AUTOTUNE),
        num_classes=classes,
        input_shape=(image_size, image_size, 3),
        train_size=train_size,
        val_size=val_size,
        calibration=train.batch(batch_size),
    )
