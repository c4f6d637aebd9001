"""settings: the variant defaults, the one-line checks and the params both trainers share."""
import click
import pytest

from radt_ext.workloads.settings import Family, run_params, settle

FAMILY = Family("cnn", half_variant="amp", compile_variant="compiled", compile_mode="default")
CHOICES = {"model_name": ("small_cnn", "mlp"), "precision": ("fp32", "bf16", "fp16")}
OPTS = {"recipe": "", "variant": "baseline", "model_name": "small_cnn", "precision": "", "compile_mode": "",
        "data_dir": "", "batch_size": 8, "epochs": 1, "lr": 0.1, "seed": 0, "patience": 0, "sparsity": 0.5,
        "prune_method": "structured", "finetune_epochs": 1, "quant_scheme": "fp8"}


def no_checks(cfg):
    return []


def test_variant_defaults_fill_only_what_is_unset():
    amp = settle({**OPTS, "variant": "amp"}, FAMILY, CHOICES, no_checks)
    assert (amp["recipe"], amp["precision"], amp["compile_mode"]) == ("cnn_amp", "bf16", "none")
    compiled = settle({**OPTS, "variant": "compiled", "recipe": "mine"}, FAMILY, CHOICES, no_checks)
    assert (compiled["recipe"], compiled["precision"], compiled["compile_mode"]) == ("mine", "fp32", "default")


@pytest.mark.parametrize("change,line", [
    ({"model_name": "vgg99"}, "unknown model 'vgg99'; choose one of small_cnn, mlp"),
    ({"variant": "amp", "precision": "fp32"}, "variant=amp trains in bf16 or fp16; set precision=bf16 or fp16"),
    ({"data_dir": "/no/such/folder"}, "data='/no/such/folder' is not a folder; pass a folder with one sub-folder"),
])
def test_bad_settings_get_one_line(change, line):
    with pytest.raises(click.ClickException) as err:
        settle({**OPTS, **change}, FAMILY, CHOICES, no_checks)
    assert err.value.message.startswith(line)


def test_the_trainers_own_checks_come_first():
    with pytest.raises(click.ClickException, match="^not installed$"):
        settle({**OPTS, "model_name": "vgg99"}, FAMILY, CHOICES, lambda cfg: [(False, "not installed")])


def test_params_read_unused_variant_options_as_off():
    base = run_params(settle(OPTS, FAMILY, CHOICES, no_checks))
    assert (base["sparsity"], base["prune_method"], base["finetune_epochs"], base["quant_scheme"]) == (0.0, "none", 0, "none")
    assert (base["model"], base["data"], base["compile_mode"]) == ("small_cnn", "", "none")
    pruned = run_params(settle({**OPTS, "variant": "pruned"}, FAMILY, CHOICES, no_checks))
    assert (pruned["sparsity"], pruned["prune_method"], pruned["finetune_epochs"]) == (0.5, "structured", 1)
    quantized = run_params(settle({**OPTS, "variant": "quantized"}, FAMILY, CHOICES, no_checks))
    assert quantized["quant_scheme"] == "fp8"
