"""Users' scripts as they are written: they import nothing of radt-ext and log nothing. radt-ext counts
their work from outside their code (the start-up hook); the benchmarks and proofs run them unchanged."""
