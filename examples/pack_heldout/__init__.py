"""Jobs of kinds the packing model was never fitted or tuned on: the held-out packing queue
(scripts/gpu/pack_heldout.sh)."""
