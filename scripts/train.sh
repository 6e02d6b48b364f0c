#!/usr/bin/env bash
# The README's main command: a real 4-process DDP training run on this CPU machine with the
# dynamiccl backend tuning live; prints the loss and, at the end, what it learned, then writes a
# page with plots of it (python -m dynamiccl_pg report) and prints its path.
# Extra arguments go to examples/train_ddp.py (try --help).
#   DYNAMICCL_REPORT_DIR  where the traces and the page go (default: a new temporary folder)
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
REPORT_DIR="${DYNAMICCL_REPORT_DIR:-$(mktemp -d -t dynamiccl-report.XXXXXX)}"
mkdir -p "$REPORT_DIR"
export DYNAMICCL_TRACE="${DYNAMICCL_TRACE:-$REPORT_DIR/trace}"
torchrun --standalone --nproc-per-node="${NPROC:-4}" examples/train_ddp.py "$@"
if compgen -G "$DYNAMICCL_TRACE.rank*.jsonl" >/dev/null; then  # (none with --backend gloo)
  echo "[dynamiccl] report: $(python -m dynamiccl_pg report "$DYNAMICCL_TRACE" --out "$REPORT_DIR")"
fi
