// The few declarations of NVIDIA's nvml.h that kwatt needs (the header is not a build
// dependency), shared by the NVML source (nvml.cc), which loads libnvidia-ml.so.1 with dlopen, and
// the fake library of its tests (tests/fake_nvml), so that both see the very function types NVML
// has: the structs at global scope with NVML's names, as C declares them. Values and layouts are
// NVML's ABI, stable since its first versions.
#ifndef KWATT_SRC_METER_SOURCES_NVML_ABI_H_
#define KWATT_SRC_METER_SOURCES_NVML_ABI_H_

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

// nvmlProcessInfo_t of nvmlDeviceGetComputeRunningProcesses_v2 and _v3.
struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
using nvmlProcessInfo_t = nvmlProcessInfo_st;

#endif  // KWATT_SRC_METER_SOURCES_NVML_ABI_H_
