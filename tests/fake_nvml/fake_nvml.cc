// A fake NVML (libnvidia-ml.so.1) for the meter's tests: a real shared library exporting the
// functions kwatt's NVML source loads with dlopen(3)/dlsym(3), whose GPUs and energy traces the
// test sets (this machine has no NVIDIA GPU).
//
// Configuration: kwatt_fake_nvml_configure(TEXT), found by the test with dlsym on the same library
// (dlopen of one path gives one copy, shared with the source under test). TEXT has one item per
// line:
//   init=CODE                      nvmlInit_v2 answers CODE (an nvmlReturn_t; default 0)
//   count=CODE                     nvmlDeviceGetCount_v2 answers CODE
//   gpu
//   name=NAME;uuid=UUID;energy=TRACE[;handle=CODE][;processes=PID,PID...][;processes_error=CODE]
// TRACE is a comma-separated list read one item per nvmlDeviceGetTotalEnergyConsumption call: a
// number of millijoules, or eCODE for an error answer; the last item repeats. An empty TRACE
// answers NVML_ERROR_NOT_SUPPORTED (a GPU older than Volta).
// kwatt_fake_nvml_inits() tells how many nvmlInit_v2 were not yet matched by nvmlShutdown.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "src/meter/sources/nvml_abi.h"

namespace {

struct FakeGpu {
  std::string name, uuid;
  std::vector<std::string> trace;
  size_t next = 0;
  int handle_error = 0;
  std::vector<unsigned> processes;
  int processes_error = 0;
};

struct State {
  std::mutex mutex;
  int init_error = 0;
  int count_error = 0;
  std::vector<FakeGpu> gpus;
  int inits = 0;
};

State& TheState() {
  static State state;
  return state;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

void Configure(State& s, const std::string& text) {
  s.init_error = s.count_error = 0;
  s.gpus.clear();
  for (const std::string& line : Split(text, '\n')) {
    if (line.rfind("init=", 0) == 0) s.init_error = std::atoi(line.c_str() + 5);
    if (line.rfind("count=", 0) == 0) s.count_error = std::atoi(line.c_str() + 6);
    if (line.rfind("gpu ", 0) != 0) continue;
    FakeGpu gpu;
    for (const std::string& field : Split(line.substr(4), ';')) {
      size_t equal = field.find('=');
      if (equal == std::string::npos) continue;
      std::string key = field.substr(0, equal), value = field.substr(equal + 1);
      if (key == "name") gpu.name = value;
      if (key == "uuid") gpu.uuid = value;
      if (key == "energy") gpu.trace = Split(value, ',');
      if (key == "handle") gpu.handle_error = std::atoi(value.c_str());
      if (key == "processes_error") gpu.processes_error = std::atoi(value.c_str());
      if (key == "processes") {
        for (const std::string& pid : Split(value, ','))
          gpu.processes.push_back(unsigned(std::stoul(pid)));
      }
    }
    s.gpus.push_back(gpu);
  }
}

constexpr int kSuccess = 0, kUninitialized = 1, kInvalidArgument = 2, kNotSupported = 3,
              kInsufficientSize = 7;

// A device handle is the GPU's index + 1 (never null).
FakeGpu* GpuOf(State& s, nvmlDevice_t device) {
  size_t index = reinterpret_cast<size_t>(device);
  if (index == 0 || index > s.gpus.size()) return nullptr;
  return &s.gpus[index - 1];
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void kwatt_fake_nvml_configure(const char* text) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  Configure(s, text);
}

__attribute__((visibility("default"))) int kwatt_fake_nvml_inits() {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  return s.inits;
}

__attribute__((visibility("default"))) int nvmlInit_v2() {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  if (s.init_error) return s.init_error;
  ++s.inits;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  if (s.inits == 0) return kUninitialized;
  --s.inits;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  if (s.inits == 0) return kUninitialized;
  if (s.count_error) return s.count_error;
  *count = unsigned(s.gpus.size());
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                                         nvmlDevice_t* device) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  if (s.inits == 0) return kUninitialized;
  if (index >= s.gpus.size()) return kInvalidArgument;
  if (s.gpus[index].handle_error) return s.gpus[index].handle_error;
  *device = reinterpret_cast<nvmlDevice_t>(size_t(index) + 1);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                             unsigned int length) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  FakeGpu* gpu = GpuOf(s, device);
  if (!gpu) return kInvalidArgument;
  if (gpu->name.size() + 1 > length) return kInsufficientSize;
  std::memcpy(name, gpu->name.c_str(), gpu->name.size() + 1);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                             unsigned int length) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  FakeGpu* gpu = GpuOf(s, device);
  if (!gpu) return kInvalidArgument;
  if (gpu->uuid.size() + 1 > length) return kInsufficientSize;
  std::memcpy(uuid, gpu->uuid.c_str(), gpu->uuid.size() + 1);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetTotalEnergyConsumption(
    nvmlDevice_t device, unsigned long long* millijoules) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  FakeGpu* gpu = GpuOf(s, device);
  if (!gpu) return kInvalidArgument;
  if (gpu->trace.empty()) return kNotSupported;
  const std::string& item = gpu->trace[std::min(gpu->next, gpu->trace.size() - 1)];
  ++gpu->next;
  if (!item.empty() && item[0] == 'e') return std::atoi(item.c_str() + 1);
  *millijoules = std::stoull(item);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos) {
  State& s = TheState();
  std::lock_guard lock(s.mutex);
  FakeGpu* gpu = GpuOf(s, device);
  if (!gpu || !count) return kInvalidArgument;
  if (gpu->processes_error) return gpu->processes_error;
  unsigned room = *count;
  *count = unsigned(gpu->processes.size());
  if (room < gpu->processes.size()) return kInsufficientSize;
  for (size_t i = 0; i < gpu->processes.size(); ++i) {
    infos[i] = nvmlProcessInfo_t{gpu->processes[i], 1u << 20, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  return kSuccess;
}

// The strings of NVIDIA's nvmlErrorString for the codes the tests use.
__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  switch (result) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case 3:
      return "Not Supported";
    case 4:
      return "Insufficient Permissions";
    case 7:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case 15:
      return "GPU is lost";
    case 18:
      return "RM has detected an NVML/RM version mismatch.";
    default:
      return "Unknown Error";
  }
}

}  // extern "C"
