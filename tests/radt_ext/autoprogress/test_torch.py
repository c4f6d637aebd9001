"""PyTorch counted from inside unmodified scripts: optimizer steps, data-loader passes (training and
evaluation batches, samples, epochs and their marks), calls of the outermost module, torch.compile."""
import json

TRAIN_AND_VALIDATE = """
    import torch, torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(50, 4), torch.randn(50, 1)), batch_size=8, shuffle=True)
    val = DataLoader(TensorDataset(torch.randn(20, 4), torch.randn(20, 1)), batch_size=6, num_workers=NUM_WORKERS)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    for epoch in range(3):
        model.train()
        for x, y in train:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for x, y in val:
                model(x)
    print("trained")
"""


def test_training_with_validation_counts_exactly(run_script):
    ran = run_script(TRAIN_AND_VALIDATE.replace("NUM_WORKERS", "0"))
    assert ran.returncode == 0 and "trained" in ran.stdout, ran.stderr
    assert ran.last("torch") == {
        "steps": 21, "train_batches": 21, "train_samples": 150,  # 7 batches an epoch, the last of 2
        "eval_batches": 12, "eval_samples": 60, "forwards": 33, "forward_samples": 210, "epochs": 3,
        "step_samples": 150}  # the model's input at each step: its training calls, not the validation's
    assert ran.epoch_marks("torch") == [(1, "start"), (1, "end"), (2, "start"), (2, "end"), (3, "start"), (3, "end")]
    marks = [r for r in ran.of("torch") if "epoch" in r]
    assert all(a["t"] <= b["t"] for a, b in zip(marks, marks[1:]))
    assert sum(1 for r in ran.of("torch") if r.get("hooked")) == 1 and ran.stderr == ""


def test_the_totals_at_an_epoch_mark_hold_exactly_the_epochs_before_it(run_script):
    ran = run_script(TRAIN_AND_VALIDATE.replace("NUM_WORKERS", "0"))
    ran.assert_epoch_totals("torch", [50] * 3)


def test_a_loader_with_worker_processes_is_counted_in_the_main_process(run_script):
    ran = run_script(TRAIN_AND_VALIDATE.replace("NUM_WORKERS", "2"))
    assert ran.returncode == 0, ran.stderr
    assert set(ran.totals("torch")) == {r["pid"] for r in ran.of("torch") if r.get("hooked")}
    last = ran.last("torch")
    assert (last["train_samples"], last["eval_samples"], last["epochs"]) == (150, 60, 3)


def test_inference_without_a_loader_counts_the_outermost_calls(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
                self.act = nn.ReLU()
            def forward(self, x):
                return self.act(self.conv(x))
        model = nn.Sequential(Block(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
        loss = nn.CrossEntropyLoss()  # called at the top level, but no model
        with torch.inference_mode():
            for i in range(300):
                out = model(torch.randn(3 + i % 2, 3, 8, 8))
                loss(out, torch.zeros(out.shape[0], dtype=torch.long))
        print("ok")
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.last("torch") == {"forwards": 300, "forward_samples": 150 * 3 + 150 * 4}


def test_a_loader_of_dicts_and_keyword_calls(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        from torch.utils.data import DataLoader, Dataset
        class Tokens(Dataset):
            def __len__(self):
                return 30
            def __getitem__(self, i):
                return {"input_ids": torch.full((5,), i), "labels": torch.tensor(i % 2)}
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(64, 4)
                self.head = nn.Linear(4, 2)
            def forward(self, input_ids=None, labels=None):
                logits = self.head(self.emb(input_ids).mean(1))
                return nn.functional.cross_entropy(logits, labels)
        model = Model()
        opt = torch.optim.Adam(model.parameters())
        for epoch in range(2):
            for batch in DataLoader(Tokens(), batch_size=4):
                model(**batch).backward()
                opt.step()
                opt.zero_grad()
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.last("torch") == {"steps": 16, "train_batches": 16, "train_samples": 60, "forwards": 16,
                                 "forward_samples": 60, "step_samples": 60, "epochs": 2}


def test_a_generator_fed_loop_counts_the_models_input_at_each_step(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        def batches():
            for _ in range(25):
                yield torch.randn(16, 4), torch.randn(16, 1)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in batches():
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.last("torch") == {"steps": 25, "forwards": 25, "forward_samples": 400, "step_samples": 400}
    assert ran.epoch_marks("torch") == []


def test_tensor_fed_training_counts_the_input_of_the_model_the_optimizer_steps(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        torch.manual_seed(0)
        teacher = nn.Linear(4, 1)  # called first and every step, but not stepped: none of the samples
        student = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(student.parameters(), lr=0.01)
        x = torch.randn(12, 4)
        for step in range(10):
            for micro in (x[:6], x[6:]):  # gradient accumulation: two calls of 6 samples a step
                with torch.no_grad():
                    target = teacher(micro)
                nn.functional.mse_loss(student(micro), target).backward()
            opt.step()
            opt.zero_grad()
            if step % 5 == 4:
                with torch.no_grad():
                    student(torch.randn(100, 4))  # an evaluation between two steps: no training samples
        print("ok")
    """)
    assert ran.returncode == 0 and ran.stdout == "ok\n", ran.stderr
    assert ran.last("torch") == {"steps": 10, "step_samples": 120, "forwards": 20, "forward_samples": 120,
                                 "other_models": 1, "other_calls": 22}


def test_a_step_through_several_stepped_modules_counts_the_first_ones_input(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        encoder, decoder = nn.Linear(4, 8), nn.Linear(8, 4)  # the script calls both; one optimizer steps both
        opt = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()])
        for step in range(7):
            x = torch.randn(5, 4)
            nn.functional.mse_loss(decoder(encoder(x)), x).backward()
            opt.step()
            opt.zero_grad()
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.last("torch") == {"steps": 7, "step_samples": 35, "forwards": 7, "forward_samples": 35,
                                 "other_models": 1, "other_calls": 7}


def test_a_decoder_stepping_through_its_layers_counts_each_token_once(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        batch, dim, vocab = 4, 8, 50
        emb = nn.Embedding(vocab, dim)
        layers = nn.ModuleList(nn.ModuleDict({n: nn.Linear(dim, dim) for n in ("q", "k", "v", "o", "ffn")})
                               for _ in range(3))
        head = nn.Linear(dim, vocab)
        made = 0
        with torch.inference_mode():
            for sequence in range(5):
                token = torch.zeros(batch, 1, dtype=torch.long)
                for _ in range(16):  # each layer's Linears called by the script: all top-level modules
                    x = emb(token)
                    for layer in layers:
                        q, k, v = layer["q"](x), layer["k"](x), layer["v"](x)
                        x = x + layer["o"](torch.softmax(q @ k.transpose(1, 2), -1) @ v)
                        x = x + layer["ffn"](x)
                    token = head(x[:, -1]).argmax(-1, keepdim=True)
                    made += batch
        print(made)
    """)
    assert ran.returncode == 0 and ran.stdout == "320\n", ran.stderr
    # no optimizer: the layers' Linears keep no wrapper (their calls would count for nothing)
    assert ran.last("torch") == {"forwards": 80, "forward_samples": 320, "other_models": 16}


def test_modules_first_called_before_any_optimizer_count_once_one_is_made(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        features = nn.Linear(4, 4)  # the model: called first, never stepped
        head = nn.Linear(4, 1)
        x = torch.randn(12, 4)
        with torch.no_grad():  # an evaluation first: no optimizer exists yet
            head(features(x))
        opt = torch.optim.SGD(head.parameters(), lr=0.01)  # then only the head trains
        for step in range(5):
            with torch.no_grad():
                f = features(x)
            head(f).sum().backward()
            opt.step()
            opt.zero_grad()
    """)
    assert ran.returncode == 0, ran.stderr
    assert ran.last("torch") == {"steps": 5, "step_samples": 60, "forwards": 6, "forward_samples": 72,
                                 "other_models": 1, "other_calls": 5}


def test_gradient_accumulation_and_nested_iteration(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        from torch.utils.data import DataLoader, TensorDataset
        train = DataLoader(TensorDataset(torch.randn(40, 4), torch.randn(40, 1)), batch_size=4)
        probe = DataLoader(TensorDataset(torch.randn(9, 4)), batch_size=3)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i, (x, y) in enumerate(train):
            nn.functional.mse_loss(model(x), y).backward()
            if i % 2 == 1:
                for (p,) in probe:  # a look at other data inside the pass, no step in it
                    break
                opt.step()
                opt.zero_grad()
    """)
    assert ran.returncode == 0, ran.stderr
    last = ran.last("torch")
    assert (last["steps"], last["train_batches"], last["train_samples"], last["epochs"]) == (5, 10, 40, 1)
    assert (last["eval_batches"], last["eval_samples"]) == (5, 15)


COMPILED = """
    import json, torch, torch.nn as nn
    from torch._dynamo.utils import counters
    from torch.utils.data import DataLoader, TensorDataset
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))
    compiled = torch.compile(model, backend="aot_eager")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(TensorDataset(torch.randn(40, 4), torch.randn(40, 1)), batch_size=8):
        opt.zero_grad()
        nn.functional.mse_loss(compiled(x), y).backward()
        opt.step()
    with torch.no_grad():
        for _ in range(5):
            compiled(torch.randn(8, 4))
        in_place = nn.Linear(4, 2)
        in_place.compile(backend="eager")
        for _ in range(3):
            in_place(torch.randn(6, 4))
    print(json.dumps({"graph_break": sum(counters["graph_break"].values()), "frames": dict(counters["frames"]),
                      "graphs": counters["stats"]["unique_graphs"]}))
"""


def test_torch_compile_keeps_its_graphs_and_is_counted(run_script):
    plain = run_script(COMPILED, hook=False)
    hooked = run_script(COMPILED)
    assert plain.returncode == 0 and hooked.returncode == 0, plain.stderr + hooked.stderr
    assert json.loads(hooked.stdout.splitlines()[-1]) == json.loads(plain.stdout.splitlines()[-1])
    assert plain.records == []
    assert hooked.last("torch") == {"steps": 5, "train_batches": 5, "train_samples": 40, "forwards": 10,
                                    "forward_samples": 80, "other_models": 1, "other_calls": 3, "step_samples": 40,
                                    "epochs": 1}


def test_a_counted_model_pickles_copies_and_traces_as_before(run_script):
    ran = run_script("""
        import copy, io, torch, torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        model(torch.ones(2, 4))
        buf = io.BytesIO()
        torch.save(model, buf)
        print(b"radt" in buf.getvalue())
        buf.seek(0)
        loaded = torch.load(buf, weights_only=False)
        twin = copy.deepcopy(model)
        traced = torch.jit.trace(model, torch.ones(3, 4))
        scripted = torch.jit.script(model)
        x = torch.randn(5, 4)
        print(all(torch.equal(model(x), m(x)) for m in (loaded, twin, traced, scripted)))
    """)
    assert ran.returncode == 0 and ran.stdout.split() == ["False", "True"], ran.stderr
    assert not [line for line in ran.stderr.splitlines() if line.startswith("radt-ext:")] and not [r for r in ran.of("torch") if "error" in r]


def test_an_iterable_dataset_and_a_wrapper_that_fetches_ahead(run_script):
    ran = run_script("""
        import torch, torch.nn as nn
        from torch.utils.data import DataLoader, IterableDataset
        class Stream(IterableDataset):  # no length: its passes end at StopIteration only
            def __iter__(self):
                for i in range(10):
                    yield torch.full((4,), float(i)), torch.tensor([1.0])
        def ahead(loader):  # fetches the next batch before handing out this one, as accelerate does
            it = iter(loader)
            current = next(it)
            for following in it:
                yield current
                current = following
            yield current
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        one_batch = DataLoader(torch.utils.data.TensorDataset(torch.randn(3, 4), torch.randn(3, 1)), batch_size=8)
        for epoch in range(2):
            for loader in (DataLoader(Stream(), batch_size=4), one_batch):
                for x, y in ahead(loader):
                    opt.zero_grad()
                    nn.functional.mse_loss(model(x), y).backward()
                    opt.step()
    """)
    assert ran.returncode == 0, ran.stderr
    last = ran.last("torch")
    assert (last["steps"], last["train_batches"], last["train_samples"], last["epochs"]) == (8, 8, 2 * (10 + 3), 4)
    assert "eval_batches" not in last
    assert ran.epoch_marks("torch") == [(n, e) for n in (1, 2, 3, 4) for e in ("start", "end")]
