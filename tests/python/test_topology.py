"""The topology the NCCL prior assumes: what ranks describe by themselves (agreed through the
store), the assumed link bandwidths (defined once, in C++), and DYNAMICCL_TOPOLOGY overrides."""

from __future__ import annotations

import os

import pytest
import torch.distributed as dist

from dist_harness import run_ranks
from dynamiccl_pg import _C, topology
from dynamiccl_pg.config import ConfigError


def test_override_parses_every_key():
    assert topology.parse_override("nodes=4, gpus=8,intra=nvlink:450,inter=roce:25,gpu=ampere,"
                                   "cpu=amd,nvswitch=0,sharp=1,channels=16") == {
        "nodes": 4, "gpus": 8, "intra": {"type": "nvlink", "bw_GBps": 450.0},
        "inter": {"type": "roce", "bw_GBps": 25.0}, "gpu": "ampere", "cpu": "amd",
        "nvswitch": False, "sharp": True, "channels": 16}
    assert topology.parse_override("") == {}


@pytest.mark.parametrize("value, named, accepted", [
    ("nodes=0", "nodes='0'", "an integer >= 1"),
    ("gpu=turing", "gpu='turing'", "volta, ampere, hopper, blackwell"),
    ("intra=ib", "'ib' is not accepted", "nvlink, pcie"),
    ("inter=ib:-3", "bandwidth '-3'", "positive number of GB/s"),
    ("racks=2", "'racks=2'", "nodes, gpus, gpu"),
    ("cpu=arm", "cpu='arm'", "intel, amd"),
    ("sharp=yes", "sharp='yes'", "0, 1"),
])
def test_bad_override_is_a_named_error(value, named, accepted):
    with pytest.raises(ConfigError) as e:
        topology.parse_override(value)
    assert named in str(e.value) and accepted in str(e.value)


def test_names_and_assumed_bandwidths_come_from_the_core():
    vocab = _C.vocabulary()
    assert topology.GPUS == tuple(vocab["gpus"]) and topology.INTER == tuple(vocab["inter_links"])
    assert _C.assumed_bw_GBps("nvlink", "hopper") == 370.0  # 18 links x 20.6 GB/s
    assert _C.assumed_bw_GBps("pcie", "hopper") == 24.0
    assert _C.assumed_bw_GBps("roce", "ampere") == _C.assumed_bw_GBps("ib", "ampere") == 25.0
    with pytest.raises(ValueError, match="gpu 'turing' is not accepted; accepted: volta"):
        _C.assumed_bw_GBps("nvlink", "turing")
    with pytest.raises(ValueError, match="link 'nvlink5' is not accepted; accepted: nvlink"):
        _C.assumed_bw_GBps("nvlink5", "hopper")
    described = _C.described_topology(2, 4, "ampere", False)
    assert described["intra"] == {"type": "nvlink", "bw_GBps": 240.0, "lat_us": 0.0}
    assert described["inter"]["type"] == "ib" and described["nvswitch"]
    assert not _C.described_topology(1, 4, "ampere", True)["nvswitch"]  # no NVSwitch on PCIe
    # What the prior predicts on it is NCCL's model of that communicator.
    assert set(_C.nccl_predict(described, "allreduce", 1 << 20)) >= {"default", "ring/Simple"}


def _describe(rank, size, override):
    store = dist.PrefixStore("topology-test", dist.distributed_c10d._get_default_store())
    return topology.describe(store, rank, size, topology.parse_override(override))


def test_ranks_describe_the_same_topology_and_overrides_apply():
    # No GPU here: the facts are the host (one) and no GPU, so the oldest assumption is not
    # taken; the shape comes from the hosts, and the generation defaults to hopper.
    plain = run_ranks(_describe, 4, "", backend="gloo")
    assert all(d == plain[0] for d in plain)
    assert plain[0] == _C.described_topology(1, 4, "hopper", False)

    given = run_ranks(_describe, 4, "nodes=2,gpus=2,inter=roce,gpu=ampere", backend="gloo")
    assert all(d == given[0] for d in given)
    d = given[0]
    assert (d["nodes"], d["gpus_per_node"], d["gpu"]) == (2, 2, "ampere")
    # A link type without a figure gets its assumed bandwidth; other fields keep theirs.
    assert d["inter"] == {"type": "roce", "bw_GBps": 25.0, "lat_us": 2.0}

    # A shape that does not match the group's size is ignored: the hosts give it.
    mismatch = run_ranks(_describe, 4, "nodes=3,gpus=8", backend="gloo")
    assert (mismatch[0]["nodes"], mismatch[0]["gpus_per_node"]) == (1, 4)


def _describe_as_two_hosts(rank, size):
    os.environ["NCCL_HOSTID"] = f"host{rank // 2}"  # as NCCL is told to see two hosts
    return _describe(rank, size, "")


def test_ranks_with_different_nccl_hostids_are_different_hosts():
    # Found on a GPU: two ranks of one machine with an NCCL_HOSTID each talk through NCCL's
    # socket transport, while the prior, from the host name, assumed NVLink and offered no tree.
    described = run_ranks(_describe_as_two_hosts, 4, backend="gloo")
    assert all(d == described[0] for d in described)
    assert (described[0]["nodes"], described[0]["gpus_per_node"]) == (2, 2)


def test_the_prior_follows_nccls_channel_bounds(monkeypatch):
    # Found on a GPU: with NCCL_MIN_NCHANNELS=8 NCCL ran 8 channels over its sockets while the
    # prior derived 4 from the links, so it offered no c4 cap and priced the caps it did offer
    # against the wrong count.
    described = run_ranks(_describe, 2, "", backend="gloo",
                          env={"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16"})
    assert all(d == described[0] for d in described)
    assert (described[0]["min_channels"], described[0]["max_channels"]) == (8, 16)
    two_hosts = _C.described_topology(2, 1, "hopper", False)  # 4 channels from its links

    def caps(spec):
        arms = _C.nccl_predict(spec, "allreduce", 25 << 20)
        return {a for a in arms if a.startswith("ring/Simple/c")}

    assert caps(two_hosts) == {"ring/Simple/c1", "ring/Simple/c2"}
    assert "ring/Simple/c4" in caps(dict(two_hosts, min_channels=8))
    assert caps(dict(two_hosts, max_channels=2)) == {"ring/Simple/c1"}
    assert caps(dict(two_hosts, channels=2, min_channels=8)) == {"ring/Simple/c1"}  # given wins
    monkeypatch.setenv("NCCL_MIN_NCHANNELS", "many")
    with pytest.raises(ConfigError, match="NCCL_MIN_NCHANNELS='many'.*accepted: an integer >= 1"):
        topology.nccl_channel_bounds()


def _init_only(rank, size):
    return True


def test_bad_topology_variable_fails_group_creation_by_name():
    errors = run_ranks(_init_only, 2, env={"DYNAMICCL_TOPOLOGY": "intra=nvlink:fast"},
                       expect_failure=True)
    assert all("DYNAMICCL_TOPOLOGY: intra='nvlink:fast'" in str(e) for e in errors)


def test_assumed_bandwidths_follow_the_overridden_generation():
    detected = _C.described_topology(1, 4, "hopper", False)
    spec = topology.apply_override(detected, topology.parse_override("gpu=ampere,intra=nvlink:300"))
    assert spec["intra"]["bw_GBps"] == 300.0  # given
    assert spec["inter"]["bw_GBps"] == _C.assumed_bw_GBps("ib", "ampere")  # assumed, for ampere
    spec = topology.apply_override(detected, topology.parse_override("intra=pcie"))
    assert spec["intra"]["bw_GBps"] == 24.0 and not spec["nvswitch"]
