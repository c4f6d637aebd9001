"""Networks written as users write them, outside the ops catalog's families, to try the per-operation
predictor on networks it has never seen: `radt-ext ops profile examples.heldout.decoder:Decoder --batch 32`.

Each module builds with no arguments and gives its inputs with `example_inputs(batch)`. `BATCHES` holds
the batch size at which each one keeps an H100 busy (a step of a few to tens of milliseconds).
"""

BATCHES = {
    "examples.heldout.decoder:Decoder": 32,
    "examples.heldout.encoder:Encoder": 64,
    "examples.heldout.unet:UNet": 32,
    "examples.heldout.lstm:LSTMClassifier": 256,
    "examples.heldout.dwconv:DepthwiseNet": 64,
    "examples.heldout.moe:MoE": 16384,
    "examples.heldout.recommender:Recommender": 32768,
    "examples.heldout.wavenet:WaveNet": 16,
}
