"""Every virtual of the installed torch's c10d::Backend is answered: implemented by us, forwarded
to an engine, torch's own (inherited), or named as not offered with its reason, in the one table
csrc/backend/surface.h (read through _C). A new torch release that adds a virtual fails here."""

from __future__ import annotations

import os
import re

import torch

from dist_harness import ROOT
from dynamiccl_pg import _C

ANSWERS = {"ours", "forwarded", "inherited", "not offered"}


def _strip_block(text: str, start: int) -> str:
    """`text` without the brace block that opens at or after `start`."""
    depth, i = 0, text.index("{", start)
    while True:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            return text[:start] + text[i:]


def backend_virtuals(header: str) -> set:
    """The names of the virtual methods of class c10d::Backend (not of its nested Options)."""
    text = header[header.index("class TORCH_API Backend"):]
    text = re.sub(r"//[^\n]*", "", text)
    nested = re.search(r"struct TORCH_API Options", text)
    if nested:
        text = _strip_block(text, nested.start())
    return set(re.findall(r"\bvirtual\s+[\w:<>,\s*&]*?\b(~?\w+)\s*\(", text))


def our_overrides() -> set:
    """What ProcessGroupDynamicCCL declares `override` for this torch, preprocessor conditions
    included, plus what torch_compat.h's macros declare."""
    names = set()
    for rel in ("csrc/backend/process_group_dynamiccl.h", "csrc/backend/torch_compat.h"):
        with open(os.path.join(ROOT, rel)) as f:
            text = re.sub(r"//[^\n]*", "", f.read())
        text = re.sub(r"\\\n", " ", text)  # macro continuations
        names |= set(re.findall(r"\b(\w+)\s*\((?:[^;{()]|\([^()]*\))*\)\s*(?:const\s*)?override\b",
                                text))
    return names


def installed_header() -> str:
    path = os.path.join(os.path.dirname(torch.__file__), "include", "torch", "csrc", "distributed",
                        "c10d", "Backend.hpp")
    with open(path) as f:
        return f.read()


def test_every_virtual_of_the_installed_backend_is_answered():
    table = {method: (answer, how) for method, answer, how in _C.backend_surface()}
    assert set(a for a, _ in table.values()) <= ANSWERS
    virtuals = backend_virtuals(installed_header())
    assert {"allreduce", "split", "abort"} <= virtuals, "the header parser found nothing"
    unanswered = sorted(virtuals - set(table))
    assert not unanswered, (f"torch {torch.__version__}'s c10d::Backend has virtuals the backend "
                            f"does not answer (add them to csrc/backend/surface.cpp): {unanswered}")
    overridden = our_overrides()
    missing = sorted(m for m in virtuals if table[m][0] in ("ours", "forwarded")
                     and m not in overridden)
    assert not missing, f"the table says we answer these; the class does not override: {missing}"
    for method in virtuals:
        answer, how = table[method]
        assert how, method  # what we do, or why not
        if answer in ("inherited", "not offered"):
            assert method not in overridden, method


def test_the_table_names_no_virtual_torch_lacks_and_the_parser_reads_a_known_shape():
    # Every entry is a virtual of the newest supported torch (the table is the union over the
    # supported releases, and each release only adds): a misspelt entry fails here.
    table = [m for m, _, _ in _C.backend_surface()]
    assert len(table) == len(set(table))
    sample = """
    class TORCH_API Backend : public torch::CustomClassHolder {
     public:
      struct TORCH_API Options : torch::CustomClassHolder {
        virtual c10::intrusive_ptr<Options> clone() const { return nullptr; }
      };
      // virtual void commentedOut();
      virtual c10::intrusive_ptr<Work> allreduce(
          std::vector<at::Tensor>& tensors, const AllreduceOptions& opts = AllreduceOptions()) {}
      virtual bool supportsSplitting() const { return false; }
    };"""
    assert backend_virtuals(sample) == {"allreduce", "supportsSplitting"}
    if torch.__version__.startswith("2.15"):
        assert set(table) == backend_virtuals(installed_header())
