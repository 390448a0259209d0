// NVIDIA GPUs as an energy source of the power meter: NVML's total energy counter of each GPU
// (doc/meter/sources.md, "Sources").
//
// NVML (libnvidia-ml.so.1, installed with the NVIDIA driver) is loaded at run time with dlopen(3)
// from MeterEnvironment::nvml_library: kwatt has no build dependency on it, and runs on machines
// without it. Each GPU whose driver keeps an energy counter (nvmlDeviceGetTotalEnergyConsumption:
// millijoules since the driver was loaded, 64-bit; Volta and newer) is a domain:
//   source "nvml", name "gpu-N", kind "gpu", socket N (NVML's index of the GPU),
//   origin "NVML GPU N (NAME, UUID)".
// A GPU without the counter (older than Volta), or that NVML refuses to open, is left out and named
// in Notes(); it is not an error unless no GPU is left.
//
// Energy is exact: NVML's millijoules x 1000 microjoules. The counter is 64-bit and never wraps in
// practice (MaxReadPeriod() is nanoseconds::max()). A counter that goes back (the driver was
// reloaded) is flagged kReset; a GPU that cannot be read (fallen off the bus: NVML's "GPU is
// lost") is flagged kUnreadable for that read, its total unchanged, and the energy it used
// meanwhile is counted at the next read that succeeds.
//
// SaveCounters() / ResumeCounters() keep each GPU's raw counter by its UUID (not its index, which
// can change when GPUs are added or removed), format "nvml 1 UUID=MILLIJOULES ...": see
// doc/meter/sources.md, "GPUs: NVML", saved counters.
//
// Thread safety: as every EnergySource, one thread at a time. Several sources may be open at once
// (NVML counts its initialisations).
#ifndef KWATT_METER_SOURCES_NVML_H_
#define KWATT_METER_SOURCES_NVML_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/source.h"

namespace kwatt::meter {

class NvmlSource : public EnergySource {
 public:
  // Per domain (domains() order): the process ids that hold a compute context on the GPU now
  // (nvmlDeviceGetComputeRunningProcesses, _v3 or else _v2), for attributing a GPU's energy to
  // the processes that use it. A GPU that cannot tell (NVML's error: not supported, GPU lost) has
  // an empty list, and the error is in `errors` (per domain, OK when it could tell) when given.
  // Errors: NotFound when the library has neither function (a driver older than 450).
  [[nodiscard]] virtual Result<std::vector<std::vector<int64_t>>> ComputeProcesses(
      std::vector<Status>* errors = nullptr) = 0;
};

// Loads NVML and opens every GPU with an energy counter, reading each counter once (the origin of
// the totals). Errors, each naming what to do:
// - NotFound "no NVIDIA driver: libnvidia-ml.so.1 not found" when the library cannot be found, and
//   "no NVIDIA driver: ..." with NVML's "Driver Not Loaded" when the kernel module is not loaded
//   (no driver: the meter goes on without GPUs);
// - NotFound "no GPU: ..." when NVML loads but sees no GPU, or no GPU has an energy counter (each
//   named with why);
// - NotFound when the library lacks one of the functions needed (not NVML, or far too old);
// - PermissionDenied when NVML refuses for want of a permission (the device files /dev/nvidia*);
// - Unavailable with NVML's own error string when its initialisation fails otherwise ("Driver
//   Not Loaded", "RM has detected an NVML/RM version mismatch"...);
// - IOError when the library exists but cannot be loaded (another architecture...).
Result<std::unique_ptr<NvmlSource>> OpenNvml(const MeterEnvironment& environment);

}  // namespace kwatt::meter

#endif  // KWATT_METER_SOURCES_NVML_H_
