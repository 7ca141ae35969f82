"""vLLM's CPU communicator, shared memory only within one host (test scaffolding).

vLLM's CPU workers exchange tensors through POSIX shared memory whenever every
rank of a tensor/pipeline parallel group names the same shared-memory group,
which assumes the ranks share one ``/dev/shm``. Ray places the ranks on
different nodes (here: different containers), so the check also compares the
host names; across hosts the group falls back to ``torch.distributed`` (gloo
over TCP), as a real multi-node cluster would use its interconnect.
"""

import socket

import torch

from vllm.distributed.device_communicators.cpu_communicator import CpuCommunicator, _CPUSHMDistributed


class HostLocalShmCpuCommunicator(CpuCommunicator):
    """CpuCommunicator that uses shared memory only when every rank is on this host."""

    def _all_group_ranks_share_shm_group_name(self) -> bool:
        local = (socket.gethostname(), _CPUSHMDistributed.make_group_name(self))
        names = [None] * self.world_size
        torch.distributed.all_gather_object(names, local, group=self.device_group)
        return len(set(names)) == 1
