"""The CPU platform with a Ray device key (test scaffolding, see the package docstring)."""

import os

from vllm.platforms.cpu import CpuPlatform

from llm_cluster_cpu_ray import ENV_KEY


class CpuRayPlatform(CpuPlatform):  # pylint: disable=too-few-public-methods
    """vLLM's CPU platform, asking Ray for one ``$VLLM_CPU_RAY_KEY`` unit per worker.

    Ray hands out the fake resource (for example ``NPU``) that every node of
    the test cluster declares, and ``get_accelerator_ids()[key]`` returns its
    ids. The model still runs on the CPU. Tensor parallel ranks on different
    nodes talk over gloo instead of one host's shared memory
    (``communicator.HostLocalShmCpuCommunicator``).
    """

    ray_device_key: str = os.environ.get(ENV_KEY, "").strip() or "NPU"

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "llm_cluster_cpu_ray.communicator.HostLocalShmCpuCommunicator"
