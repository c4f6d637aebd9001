"""Training frameworks on top of PyTorch, counted from inside unmodified scripts through torch's own
hooks: PyTorch Lightning (a sanity validation first, a batch fetched ahead) and the Hugging Face Trainer
(accelerate's loader, a tiny model built from a config, nothing downloaded)."""
import json

import pytest


@pytest.mark.slow
def test_lightning_counts_match_the_trainer(run_script):
    ran = run_script("""
        import json, torch, torch.nn as nn, pytorch_lightning as pl
        from torch.utils.data import DataLoader, TensorDataset
        class Net(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.layer = nn.Linear(4, 1)
            def forward(self, x):
                return self.layer(x)
            def training_step(self, batch, i):
                x, y = batch
                return nn.functional.mse_loss(self(x), y)
            def validation_step(self, batch, i):
                x, y = batch
                self.log("val", nn.functional.mse_loss(self(x), y))
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)
        train = DataLoader(TensorDataset(torch.randn(50, 4), torch.randn(50, 1)), batch_size=8)
        val = DataLoader(TensorDataset(torch.randn(20, 4), torch.randn(20, 1)), batch_size=6)
        trainer = pl.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(Net(), train, val)
        print(json.dumps({"global_step": trainer.global_step, "current_epoch": trainer.current_epoch,
                          "max_epochs": trainer.max_epochs}))
    """, timeout=240)
    assert ran.returncode == 0, ran.stderr
    trainer = json.loads(ran.stdout.splitlines()[-1])
    last = ran.last("torch")
    assert last["steps"] == trainer["global_step"] == 21
    assert last["epochs"] == trainer["current_epoch"] == trainer["max_epochs"] == 3
    assert (last["train_batches"], last["train_samples"]) == (21, 3 * 50)
    assert (last["eval_batches"], last["eval_samples"]) == (2 + 3 * 4, 12 + 3 * 20)  # the sanity check's 2 batches
    assert ran.epoch_marks("torch") == [(n, e) for n in (1, 2, 3) for e in ("start", "end")]
    ran.assert_epoch_totals("torch", [50] * 3)


@pytest.mark.slow
def test_hugging_face_trainer_counts_match_its_state(run_script):
    ran = run_script("""
        import json, torch
        from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
        class Tokens(torch.utils.data.Dataset):
            def __len__(self):
                return 36
            def __getitem__(self, i):
                return {"input_ids": torch.randint(0, 50, (8,)), "attention_mask": torch.ones(8, dtype=torch.long),
                        "labels": torch.tensor(i % 2)}
        config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                            intermediate_size=16, max_position_embeddings=16)
        args = TrainingArguments(output_dir="out", num_train_epochs=2, per_device_train_batch_size=8,
                                 per_device_eval_batch_size=10, eval_strategy="epoch", save_strategy="no",
                                 report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no")
        trainer = Trainer(model=BertForSequenceClassification(config), args=args, train_dataset=Tokens(),
                          eval_dataset=Tokens())
        trainer.train()
        print(json.dumps({"global_step": trainer.state.global_step, "epoch": trainer.state.epoch}))
    """, timeout=240)
    assert ran.returncode == 0, ran.stderr
    state = json.loads(ran.stdout.splitlines()[-1])
    last = ran.last("torch")
    assert last["steps"] == state["global_step"] == 10  # 5 batches an epoch, the last of 4
    assert last["epochs"] == state["epoch"] == 2
    assert (last["train_batches"], last["train_samples"]) == (10, 2 * 36)
    assert (last["eval_batches"], last["eval_samples"]) == (2 * 4, 2 * 36)
    ran.assert_epoch_totals("torch", [36] * 2)
