#!/usr/bin/env bash
# The README's main command: a real 4-process DDP training run on this CPU machine with the
# dynamiccl backend tuning live; prints the loss and, at the end, what it learned.
# Extra arguments go to examples/train_ddp.py (try --help).
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec torchrun --standalone --nproc-per-node="${NPROC:-4}" examples/train_ddp.py "$@"
