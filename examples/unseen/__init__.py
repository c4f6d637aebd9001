"""A second suite of networks outside the ops catalog's families, written after the host-aware predictor was
chosen and never used to choose it: the predictor's figures on them are errors on networks never looked at.
`radt-ext ops profile examples.unseen.gru:GRUClassifier --batch 256`.

Each module builds with no arguments and gives its inputs with `example_inputs(batch)`. `BATCHES` holds the
batch size each is profiled at: steps of a few milliseconds, where the host's launches weigh.
"""

BATCHES = {
    "examples.unseen.gru:GRUClassifier": 256,
    "examples.unseen.small_unet:SmallUNet": 32,
    "examples.unseen.prenorm:PreNormEncoder": 64,
    "examples.unseen.mixer:Mixer": 128,
    "examples.unseen.graph:GraphNet": 64,
    "examples.unseen.vae:ConvVAE": 64,
}
